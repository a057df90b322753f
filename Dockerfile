# syntax=docker/dockerfile:1
# The `checkfu` image: one binary, every role (`checkfu serve --roles ROLE`).

# --- build ---------------------------------------------------------------
FROM rust:1.95-bookworm AS build
WORKDIR /src
# rdkafka bundles librdkafka (cmake-free build); protos compile with protox.
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --profile dist --locked -p checkfu \
 && cp target/dist/checkfu /checkfu

# --- run -----------------------------------------------------------------
FROM debian:bookworm-slim
# bubblewrap isolates the sandbox's bash; ca-certificates for provider TLS.
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 10001 --create-home --home-dir /var/lib/checkfu checkfu
COPY --from=build /checkfu /usr/local/bin/checkfu
USER 10001
WORKDIR /var/lib/checkfu
EXPOSE 7420
ENTRYPOINT ["/usr/local/bin/checkfu"]
CMD ["up", "--data-dir", "/var/lib/checkfu/data", "--listen", "0.0.0.0:7420"]
