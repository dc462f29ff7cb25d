# Sluice's own binaries and the Wasm filter, built from this repository.
#
#   docker build -f deploy/docker/sluice.Dockerfile --target rls      .   # sluice-rls
#   docker build -f deploy/docker/sluice.Dockerfile --target consumer .   # sluice-consumer
#   docker build -f deploy/docker/sluice.Dockerfile --target allinone .   # sluice-allinone
#   docker build -f deploy/docker/sluice.Dockerfile --target llm-sim  .   # sluice-llm-sim
#   docker build -f deploy/docker/sluice.Dockerfile --target filter   .   # WasmPlugin's OCI image (plugin.wasm)
#   docker build -f deploy/docker/sluice.Dockerfile --target filter-server  .  # the .wasm over HTTP
#   docker build -f deploy/docker/sluice.Dockerfile --target filter-install .  # copies the .wasm into a volume
#
# Target X makes image sluice-X (ghcr.io/sluice-llm/sluice-X:VERSION in the
# chart and docker-compose.yml). The same images from binaries built
# outside the image (release pipelines, scripts/build-images): release.Containerfile.
#
# One toolchain for everything: Debian bookworm's Rust 1.96 (rustc-web), the
# same one ./scripts/setup installs for the Wasm build (its wasm32 std source
# lets -Zbuild-std build the filter). docker-compose.yml uses these targets.

FROM debian:bookworm AS toolchain
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      rustc-web cargo-web rust-web-src rust-web-llvm lld-22 \
      build-essential pkg-config ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src

# Native services: release build of the binaries, chosen by binary name
# (not package), so moving a binary between crates does not change this file.
# `sluice` is sluice-rls, sluice-consumer and sluice-allinone in one binary
# (one LTO link, not three): each image below installs it by the name of the
# program it runs, which is how it picks that program.
FROM toolchain AS build
COPY . .
RUN cargo build --release --locked --bin sluice --bin sluice-llm-sim \
 && mkdir -p /out \
 && cp target/release/sluice target/release/sluice-llm-sim /out/

# The Wasm filter, exactly as scripts/build-wasm builds it.
FROM toolchain AS filter-build
COPY . .
RUN ./scripts/build-wasm

# A one-shot image that copies the filter into a volume Envoy mounts.
FROM debian:bookworm-slim AS filter-install
COPY --from=filter-build /src/target/sluice_filter.wasm /sluice_filter.wasm
# A named volume mounted at /filter starts with this directory's owner, so
# the copy needs no root.
RUN mkdir /filter && chown 10001:10001 /filter
USER 10001:10001
CMD ["sh", "-c", "cp /sluice_filter.wasm /filter/sluice_filter.wasm && echo installed /filter/sluice_filter.wasm"]

FROM debian:bookworm-slim AS runtime
# The crate version (Cargo.toml's workspace.package.version), as the tag.
ARG VERSION=0.1.0
LABEL org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/sluice-llm/sluice"
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 sluice \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent sluice
# Numeric, so Kubernetes' runAsNonRoot can check it (the chart runs 10001).
USER 10001:10001

# The filter as Istio's WasmPlugin pulls it (oci://…/sluice-filter:VERSION):
# one layer holding plugin.wasm, no base, nothing to run.
FROM scratch AS filter
COPY --from=filter-build /src/target/sluice_filter.wasm /plugin.wasm

# The filter over HTTP for the EnvoyFilter's remote code
# (deploy/istio/sluice-filter-envoyfilter.yaml; the chart's sluice-artifacts):
# busybox's httpd serving one read-only file as a non-root user.
FROM runtime AS filter-server
USER root
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends busybox \
 && rm -rf /var/lib/apt/lists/*
COPY --from=filter-build /src/target/sluice_filter.wasm /srv/sluice_filter.wasm
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["busybox", "httpd", "-f", "-v", "-p", "8080", "-h", "/srv"]

FROM runtime AS rls
COPY --from=build /out/sluice /usr/local/bin/sluice-rls
# gRPC (RLS v3, ext_authz), admin (/metrics /healthz /readyz), deferral endpoint.
# The admin port binds 127.0.0.1 unless --admin-addr / SLUICE_RLS_ADMIN_ADDR
# says otherwise (0.0.0.0:9091 for Prometheus and probes).
EXPOSE 8081 9091 8090
ENTRYPOINT ["/usr/local/bin/sluice-rls"]

FROM runtime AS consumer
COPY --from=build /out/sluice /usr/local/bin/sluice-consumer
# Admin: /metrics /healthz and the rates API. Binds 127.0.0.1 unless
# SLUICE_CONSUMER_ADMIN_ADDR says otherwise; bound elsewhere, rate changes
# need the token (SLUICE_ADMIN_TOKEN_FILE or SLUICE_ADMIN_TOKEN).
EXPOSE 9092
ENTRYPOINT ["/usr/local/bin/sluice-consumer"]

FROM runtime AS allinone
COPY --from=build /out/sluice /usr/local/bin/sluice-allinone
EXPOSE 8081 9091 8090 9092
ENTRYPOINT ["/usr/local/bin/sluice-allinone"]

FROM runtime AS llm-sim
COPY --from=build /out/sluice-llm-sim /usr/local/bin/sluice-llm-sim
EXPOSE 8000
ENTRYPOINT ["/usr/local/bin/sluice-llm-sim"]
