//! Dependencies between modules point one way: no module cycle in any crate
//! of the workspace. A module depends on another when it names an item of
//! it (a `use`, or a path in code); a module and its own ancestors are not
//! counted (a parent declares and re-exports its children, a child reads
//! its parent's shared types). Tests are left out. A cycle fails here with
//! its modules and their edges.
#![cfg(test)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

type Module = Vec<String>;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").to_path_buf()
}

/// Every library crate's `src/` (the workspace's members with one).
fn crates() -> Vec<PathBuf> {
    let manifest: toml::Value = toml::from_str(&std::fs::read_to_string(root().join("Cargo.toml")).unwrap()).unwrap();
    manifest["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| root().join(m.as_str().unwrap()).join("src"))
        .filter(|src| src.join("lib.rs").exists())
        .collect()
}

/// The crate's modules by path (`[]` is the crate root), each with its file.
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "bin") {
                    dirs.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut m: Module = rel.iter().map(|s| s.to_string_lossy().to_string()).collect();
            if m.last().is_some_and(|l| l == "mod") {
                m.pop();
            }
            if m == ["lib"] {
                m.clear();
            } else if m == ["main"] || m.last().is_some_and(|l| l == "tests") {
                continue;
            }
            out.insert(m, path);
        }
    }
    out
}

/// The paths a file names, outside `#[cfg(test)]` items: each `use`
/// flattened to its full path, and every path in code.
#[derive(Default)]
struct Paths(Vec<Vec<String>>);

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| a.path().is_ident("cfg") && a.meta.require_list().is_ok_and(|l| l.tokens.to_string().contains("test")))
}

fn flatten(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => out.push([prefix.clone(), vec![n.ident.to_string()]].concat()),
        syn::UseTree::Rename(r) => out.push([prefix.clone(), vec![r.ident.to_string()]].concat()),
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| flatten(t, prefix, out)),
    }
}

impl<'a> Visit<'a> for Paths {
    fn visit_item_mod(&mut self, m: &'a syn::ItemMod) {
        if !is_test(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_item_fn(&mut self, f: &'a syn::ItemFn) {
        if !is_test(&f.attrs) {
            syn::visit::visit_item_fn(self, f);
        }
    }
    fn visit_item_use(&mut self, u: &'a syn::ItemUse) {
        if !is_test(&u.attrs) {
            flatten(&u.tree, &mut vec![], &mut self.0);
        }
    }
    fn visit_path(&mut self, p: &'a syn::Path) {
        self.0.push(p.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, p);
    }
}

/// The module a path names, from module `m`: the longest prefix that is a
/// module of the crate, for paths starting at `crate`, `self`, `super` or a
/// child of `m`.
fn target(modules: &BTreeMap<Module, PathBuf>, m: &Module, path: &[String]) -> Option<Module> {
    let (mut base, mut rest) = match path.first().map(String::as_str) {
        Some("crate") => (vec![], &path[1..]),
        Some("self") => (m.clone(), &path[1..]),
        Some("super") => (m.clone(), path),
        Some(first) if modules.contains_key(&[m.as_slice(), &[first.to_string()]].concat()) => (m.clone(), path),
        _ => return None,
    };
    while rest.first().is_some_and(|s| s == "super") {
        base.pop()?;
        rest = &rest[1..];
    }
    let full = [base.as_slice(), rest].concat();
    (0..=full.len()).rev().map(|k| full[..k].to_vec()).find(|p| modules.contains_key(p))
}

fn related(a: &Module, b: &Module) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

fn edges(modules: &BTreeMap<Module, PathBuf>) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut out = BTreeMap::new();
    for (m, file) in modules {
        let ast = syn::parse_file(&std::fs::read_to_string(file).unwrap()).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let mut paths = Paths::default();
        paths.visit_file(&ast);
        let to: BTreeSet<Module> = paths.0.iter().filter_map(|p| target(modules, m, p)).filter(|t| !related(m, t)).collect();
        out.insert(m.clone(), to);
    }
    out
}

/// Strongly connected components of more than one module (Tarjan).
fn cycles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<BTreeSet<Module>> {
    struct T<'g> {
        graph: &'g BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'g Module, usize>,
        low: BTreeMap<&'g Module, usize>,
        stack: Vec<&'g Module>,
        on: BTreeSet<&'g Module>,
        out: Vec<BTreeSet<Module>>,
    }
    fn visit<'g>(t: &mut T<'g>, v: &'g Module) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.graph.get(v).into_iter().flatten() {
            let Some((w, _)) = t.graph.get_key_value(w) else { continue };
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = BTreeSet::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.insert(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                t.out.push(comp);
            }
        }
    }
    let mut t = T { graph, index: BTreeMap::new(), low: BTreeMap::new(), stack: vec![], on: BTreeSet::new(), out: vec![] };
    for v in graph.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}

fn shown(m: &Module) -> String {
    if m.is_empty() { "lib".into() } else { m.join("::") }
}

#[test]
fn no_module_cycle_in_any_crate() {
    let mut problems = vec![];
    let mut read = 0;
    for src in crates() {
        let modules = modules(&src);
        read += modules.len();
        let graph = edges(&modules);
        let krate = src.parent().unwrap().strip_prefix(root()).unwrap().display().to_string();
        for comp in cycles(&graph) {
            let lines: Vec<String> = comp
                .iter()
                .map(|m| format!("  {} -> {:?}", shown(m), graph[m].iter().filter(|t| comp.contains(*t)).map(shown).collect::<Vec<_>>()))
                .collect();
            problems.push(format!("{krate}:\n{}", lines.join("\n")));
        }
    }
    assert!(read > 300, "the workspace's modules were read ({read})");
    assert!(problems.is_empty(), "module cycles:\n{}", problems.join("\n"));
}

#[test]
fn the_scan_finds_a_cycle_through_use_and_code_paths() {
    let m = |s: &str| -> Module { s.split("::").filter(|x| !x.is_empty()).map(String::from).collect() };
    let modules: BTreeMap<Module, PathBuf> = ["", "a", "b", "c", "c::d"].iter().map(|s| (m(s), PathBuf::new())).collect();
    assert_eq!(target(&modules, &m("a"), &["crate".into(), "b".into(), "X".into()]), Some(m("b")));
    assert_eq!(target(&modules, &m("c::d"), &["super".into(), "super".into(), "a".into(), "f".into()]), Some(m("a")));
    assert_eq!(target(&modules, &m("c"), &["d".into(), "Y".into()]), Some(m("c::d")));
    assert_eq!(target(&modules, &m("a"), &["serde".into(), "Serialize".into()]), None);
    let graph: BTreeMap<Module, BTreeSet<Module>> = [
        (m("a"), [m("b")].into()),
        (m("b"), [m("c")].into()),
        (m("c"), [m("a")].into()),
        (m("c::d"), [m("a")].into()),
        (m(""), BTreeSet::new()),
    ]
    .into();
    assert_eq!(cycles(&graph), vec![[m("a"), m("b"), m("c")].into()]);
}

/// Whether a path reads the process environment (`std::env::var` and kin).
fn reads_env(path: &[String]) -> bool {
    let n = path.len();
    n >= 2 && path[n - 2] == "env" && ["var", "var_os", "vars", "vars_os"].contains(&path[n - 1].as_str())
}

#[test]
fn no_environment_read_outside_the_config_module() {
    // The config module reads the environment for everyone; the test
    // helpers and the black-box harness read which services a test run
    // provides.
    let allowed = ["crates/node/src/config/", "crates/core/src/testing.rs", "e2e/"];
    let mut readers = BTreeSet::new();
    for src in crates() {
        for file in modules(&src).values() {
            let ast = syn::parse_file(&std::fs::read_to_string(file).unwrap()).unwrap();
            let mut paths = Paths::default();
            paths.visit_file(&ast);
            if paths.0.iter().any(|p| reads_env(p)) {
                readers.insert(file.strip_prefix(root()).unwrap().display().to_string());
            }
        }
    }
    assert!(readers.contains("crates/node/src/config/env.rs"), "the scan sees the config module's reads: {readers:?}");
    let outside: Vec<&String> = readers.iter().filter(|f| !allowed.iter().any(|a| f.starts_with(a))).collect();
    assert!(
        outside.is_empty(),
        "environment read outside the config module (read it in crates/node/src/config and pass it down): {outside:?}"
    );
}

/// Each workspace crate's tier, bottom up; a crate depends only on crates
/// of lower tiers (docs/architecture.md, "The layout"), so services never
/// depend on each other and nothing below the composition knows the roles.
const TIERS: &[(&str, u8)] = &[
    ("checkfu-core", 0),
    ("checkfu-telemetry", 0),
    ("checkfu-store", 1),
    ("checkfu-ephemeral", 1),
    ("checkfu-blobs", 1),
    ("checkfu-operator-api", 1),
    ("checkfu-bus", 2),
    ("checkfu-proto", 2),
    ("checkfu-gateway", 3),
    ("checkfu-sessions", 3),
    ("checkfu-governance", 3),
    ("checkfu-model-gateway", 3),
    ("checkfu-capability-gateway", 3),
    ("checkfu-scheduler", 3),
    ("checkfu-webhooks", 3),
    ("checkfu-memory", 3),
    ("checkfu-runner", 3),
    ("checkfu-operator", 3),
    ("checkfu-cli", 3),
    ("checkfu-node", 4),
    ("checkfu", 5),
    ("checkfu-e2e", 6),
];

#[test]
fn crates_depend_only_on_lower_tiers() {
    let manifest: toml::Value = toml::from_str(&std::fs::read_to_string(root().join("Cargo.toml")).unwrap()).unwrap();
    let tier = |name: &str| TIERS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t);
    let mut problems = vec![];
    let members = manifest["workspace"]["members"].as_array().unwrap();
    for m in members {
        let krate: toml::Value =
            toml::from_str(&std::fs::read_to_string(root().join(m.as_str().unwrap()).join("Cargo.toml")).unwrap()).unwrap();
        let name = krate["package"]["name"].as_str().unwrap();
        let Some(mine) = tier(name) else {
            problems.push(format!("{name}: no tier (place it in TIERS and in docs/architecture.md)"));
            continue;
        };
        for dep in krate.get("dependencies").and_then(toml::Value::as_table).into_iter().flat_map(|t| t.keys()) {
            match tier(dep) {
                Some(t) if t >= mine => problems.push(format!("{name} (tier {mine}) depends on {dep} (tier {t})")),
                _ => {}
            }
        }
    }
    assert_eq!(members.len(), TIERS.len(), "every member has a tier");
    assert!(problems.is_empty(), "dependencies must point down:\n{}", problems.join("\n"));
}

/// The type an inherent `impl` block (not a trait's) is for, by its last
/// path segment.
fn inherent_impls(ast: &syn::File) -> Vec<String> {
    ast.items
        .iter()
        .filter_map(|i| match i {
            syn::Item::Impl(imp) if imp.trait_.is_none() && !is_test(&imp.attrs) => match imp.self_ty.as_ref() {
                syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[test]
fn the_sessions_service_only_composes_its_components() {
    // The sessions service is components (docs/architecture.md): each holds
    // only what it needs and knows nothing of the struct that composes
    // them, whose own rules (a Session's creation, input, selection,
    // archiving) are in service.rs alone. The builder assembles it, the
    // crate root and the SessionsService adapter serve it, and the store's
    // conformance suite (a test-only module) builds one for service tests.
    let src = root().join("services/sessions/src");
    let knows_the_service = ["lib.rs", "service.rs", "builder.rs", "grpc.rs", "store/conformance.rs"];
    let (mut impls, mut naming) = (vec![], vec![]);
    let mut components = BTreeSet::new();
    for file in modules(&src).values() {
        let rel = file.strip_prefix(&src).unwrap().display().to_string();
        let ast = syn::parse_file(&std::fs::read_to_string(file).unwrap()).unwrap();
        let types = inherent_impls(&ast);
        if types.iter().any(|t| t == "SessionsService") && rel != "service.rs" {
            impls.push(rel.clone());
        }
        components.extend(types);
        let mut paths = Paths::default();
        paths.visit_file(&ast);
        if paths.0.iter().any(|p| p.iter().any(|s| s == "SessionsService")) && !knows_the_service.contains(&rel.as_str()) {
            naming.push(rel);
        }
    }
    for c in ["Log", "Catalog", "Uploads", "Runs", "Runners", "Threads", "Outcomes", "Approvals", "Budgets"] {
        assert!(components.contains(c), "the scan sees the component {c}: {components:?}");
    }
    assert!(impls.is_empty(), "SessionsService is implemented outside service.rs (make it a component's): {impls:?}");
    assert!(naming.is_empty(), "a component names the service that composes it: {naming:?}");
}
