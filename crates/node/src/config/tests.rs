use super::*;

fn file(text: &str) -> tempfile::NamedTempFile {
    let f = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(f.path(), text).expect("write");
    f
}

fn load(text: &str, env: Env) -> Result<Loaded, ConfigError> {
    let f = file(text);
    Config::load(Mode::Serve, Some(f.path()), &env, &[])
}

#[test]
fn layers_override_in_order_and_remember_where_values_came_from() {
    let f = file("listen = \"10.0.0.1:80\"\n[limits]\nrate_limit_per_second = 10\nmax_streams_per_principal = 7\n");
    let env = Env::from([("CHECKFU_RATE_LIMIT_PER_SECOND", "20"), ("CHECKFU_KAFKA_BROKERS", "k:9092")]);
    let flags = [("listen", toml::Value::String("127.0.0.1:9".into()), "listen")];
    let c = Config::load(Mode::Serve, Some(f.path()), &env, &flags).expect("valid");
    assert_eq!(c.listen, "127.0.0.1:9", "a flag beats the file");
    assert_eq!(c.limits.rate_limit_per_second, 20, "the environment beats the file");
    assert_eq!(c.limits.max_streams_per_principal, 7, "the file beats the default");
    assert_eq!(c.limits.auth_failures_per_window, checkfu_gateway::auth::AUTH_FAILURES_PER_WINDOW);
    assert_eq!(c.kafka_brokers.as_deref(), Some("k:9092"));
    assert_eq!(c.sources["listen"], Source::Flag("listen"));
    assert_eq!(c.sources["limits.rate_limit_per_second"], Source::Env("CHECKFU_RATE_LIMIT_PER_SECOND"));
    assert_eq!(c.sources["limits.max_streams_per_principal"], Source::File(f.path().to_path_buf()));
    assert_eq!(c.sources["timing.run_lease_ms"], Source::Default);
}

#[test]
fn defaults_depend_on_the_mode() {
    let up = Config::load(Mode::Up, None, &Env::default(), &[]).expect("defaults are valid");
    let serve = Config::load(Mode::Serve, None, &Env::default(), &[]).expect("defaults are valid");
    assert_eq!(up.listen, "127.0.0.1:7420");
    assert_eq!(serve.listen, "0.0.0.0:7420");
    assert!(matches!(up.location(), checkfu_store::Location::SqliteDir(d) if d == Path::new(".checkfu")));
    assert_eq!(up.bootstrap_key_file(), PathBuf::from(".checkfu/admin.key"));
    assert_eq!(up.workspaces(), PathBuf::from(".checkfu/workspaces"));
}

#[test]
fn errors_name_the_key_where_it_came_from_and_the_rule() {
    let e = load("", Env::from([("CHECKFU_RATE_LIMIT_PER_SECOND", "lots")])).expect_err("not a number");
    assert_eq!(e.key, "limits.rate_limit_per_second");
    assert_eq!(e.source, Source::Env("CHECKFU_RATE_LIMIT_PER_SECOND"));
    assert!(e.to_string().contains("must be a whole number, got \"lots\""), "{e}");

    let e = load("[limits]\nrate_limit_per_second = 0\n", Env::default()).expect_err("zero");
    assert_eq!((e.key.as_str(), e.rule.as_str()), ("limits.rate_limit_per_second", "must be at least 1"));
    assert!(matches!(e.source, Source::File(_)));

    let e = load("[limits]\nrate_limit_per_second = -3\n", Env::default()).expect_err("negative");
    assert_eq!(e.key, "limits.rate_limit_per_second", "{e}");

    let e = load("nope = 1\n", Env::default()).expect_err("unknown key");
    assert!(e.rule.contains("unknown field `nope`"), "{e}");

    let e = load("[limits]\nrate_limits_per_second = 1\n", Env::default()).expect_err("misspelt key");
    assert_eq!(e.key, "limits.rate_limits_per_second", "{e}");
    assert!(e.rule.contains("unknown field") && e.rule.contains("rate_limit_per_second"), "names what is known: {e}");

    let e = load("listen = \"7420\"\n", Env::default()).expect_err("no host");
    assert_eq!(e.key, "listen");

    let e = load("", Env::from([("CHECKFU_RUN_LEASE_MS", "500")])).expect_err("too short a lease");
    assert_eq!(e.key, "timing.run_lease_ms");

    let e = load("", Env::from([("CHECKFU_ALLOW_PRIVATE_TARGETS", "maybe")])).expect_err("not a boolean");
    assert_eq!(e.key, "allow_private_targets");

    let e = load("", Env::from([("CHECKFU_SECRETS_KEY", "short")])).expect_err("a short key");
    assert_eq!((e.key.as_str(), e.source.clone()), ("secrets_key", Source::Env("CHECKFU_SECRETS_KEY")));
    assert!(!e.to_string().contains("short\""), "the error does not echo the key: {e}");

    let e = load("storage = \"mysql://x\"\n", Env::default()).expect_err("not postgres");
    assert_eq!(e.key, "storage");

    let e = load("listen = [1\n", Env::default()).expect_err("not TOML");
    assert!(matches!(e.source, Source::File(_)), "{e}");
}

#[test]
fn endpoints_must_be_roles_over_mutual_tls() {
    let c = load("[endpoints]\nsessions = \"https://s:1\"\n", Env::default()).expect("valid");
    assert_eq!(c.remotes().get(&Role::Sessions).map(String::as_str), Some("https://s:1"));
    let e = load("[endpoints]\nsessions = \"http://s:1\"\n", Env::default()).expect_err("plaintext");
    assert_eq!(e.key, "endpoints.sessions");
    let e = load("[endpoints]\nfoo = \"https://x:1\"\n", Env::default()).expect_err("not a role");
    assert_eq!(e.key, "endpoints.foo");
    // Several replicas, listed.
    let c = load("[endpoints]\nsessions = \"https://10.0.0.1:1, https://10.0.0.2:1\"\n", Env::default()).expect("a list");
    assert!(c.remotes()[&Role::Sessions].contains("10.0.0.2"));
    let e = load("[endpoints]\nsessions = \"https://10.0.0.1:1,http://10.0.0.2:1\"\n", Env::default()).expect_err("one plaintext");
    assert_eq!(e.key, "endpoints.sessions");
}

#[test]
fn model_endpoint_keys_come_from_the_variables_they_name() {
    let text = "[model_endpoints.vllm]\nprovider = \"openai\"\nbase_url = \"https://vllm.example/v1\"\napi_key_env = \"VLLM_KEY\"\n";
    let c = load(text, Env::from([("VLLM_KEY", "sk-vllm"), ("CHECKFU_OPENAI_API_KEY", "sk-openai")])).expect("valid");
    let endpoints = &c.model_endpoints;
    assert!(endpoints.get("vllm").is_some_and(|e| e.has_key()));
    assert!(endpoints.get("openai").is_some_and(|e| e.has_key()));
    let e = load("[model_endpoints.x]\nprovider = \"nope\"\nbase_url = \"https://x\"\n", Env::default()).expect_err("bad provider");
    assert_eq!(e.key, "model_endpoints.x");
}

#[test]
fn the_printed_configuration_redacts_secrets() {
    let env = Env::from([
        ("CHECKFU_SECRETS_KEY", "0123456789abcdef0123456789abcdef-secret"),
        ("CHECKFU_OPENAI_API_KEY", "sk-live-openai"),
        ("CHECKFU_DATABASE_URL", "postgres://checkfu:hunter2@db/checkfu"),
        ("CHECKFU_REDIS_URL", "redis://:redispass@redis:6379"),
    ]);
    let c = load("", env).expect("valid");
    let text = c.render();
    for secret in ["0123456789abcdef", "sk-live-openai", "hunter2", "redispass"] {
        assert!(!text.contains(secret), "{secret} printed:\n{text}");
    }
    assert!(text.contains("postgres://checkfu:%3Credacted%3E@db/checkfu") || text.contains("<redacted>@db"), "{text}");
    assert!(text.contains("providers.openai_api_key <- $CHECKFU_OPENAI_API_KEY"), "{text}");
    assert!(!format!("{:?}", c.config).contains("sk-live-openai"), "Debug redacts too");
    let reparsed: toml::Table = text.parse().expect("the output is TOML");
    assert!(reparsed.contains_key("limits"));
}

#[test]
fn docs_list_every_key_and_variable() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md")).expect("docs/configuration.md");
    for var in env::VARIABLES {
        assert!(doc.contains(&format!("| `{}` | `{}` |", var.key, var.name)), "docs/configuration.md lacks the row of {}", var.key);
    }
    let c = Config::load(Mode::Up, None, &Env::default(), &[]).expect("defaults");
    for key in c.sources.keys() {
        assert!(doc.contains(&format!("`{key}`")), "docs/configuration.md does not mention {key}");
    }
}

#[test]
fn the_cma_prefix_is_a_path_apart_from_the_native_api() {
    let c = load("", Env::from([("CHECKFU_CMA_PREFIX", "/compat/cma")])).expect("a nested path");
    assert_eq!(c.config.cma_prefix, "/compat/cma");
    for bad in ["cma", "/", "/v1", "/v1/cma", "/cma/", "/a b"] {
        let e = load("", Env::from([("CHECKFU_CMA_PREFIX", bad)])).expect_err(bad);
        assert_eq!(e.key, "cma_prefix", "{bad}: {e}");
    }
}
