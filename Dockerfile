# syntax=docker/dockerfile:1
# The kubeplace operator image: `kubeplace run` in a distroless image, as a
# non-root user. Build from the repository root:
#   docker build -t kubeplace:0.1.0 .

FROM docker.io/library/rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY crates ./crates
COPY schemas ./schemas
# Cargo reads every declared target when it loads the package, benches included.
COPY benches/cluster_claims.rs benches/webhook_load.rs benches/quota_claims.rs benches/placement_api_cluster.rs benches/failover_soak.rs ./benches/
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin kubeplace \
 && cp target/release/kubeplace /kubeplace

# glibc and libgcc, nothing else: no shell, no package manager.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /kubeplace /usr/local/bin/kubeplace
# 65532 is distroless's `nonroot`; the Deployment also sets runAsNonRoot.
USER 65532:65532
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/kubeplace"]
CMD ["run"]
