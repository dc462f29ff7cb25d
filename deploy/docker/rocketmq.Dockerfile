# RocketMQ name server + broker for Sluice's LiteTopics: rocketmq-rust 1.0.0,
# built from this workspace (package sluice-broker: upstream's binaries, the
# workspace's Cargo.lock, the store's two fixes and the broker's one in
# vendor/PATCHES.md),
# with this repository's broker config templates (lite-topic/broker/*.toml.in:
# LMQ and multi-dispatch on, which LiteTopics need).
#
#   docker build -f deploy/docker/rocketmq.Dockerfile -t sluice-rocketmq .
#   docker run sluice-rocketmq namesrv
#   docker run -e BROKER_IP=... -e NAMESRV_ADDR=...:9876 sluice-rocketmq broker
#
# The compile is the broker part of scripts/setup's release build.

FROM debian:bookworm AS build
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      rustc-web cargo-web build-essential cmake pkg-config zlib1g-dev ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# One binary, sluice-rocketmq, for both: the name it is run by picks the main.
RUN cargo build --release --locked -p sluice-broker --bin sluice-rocketmq \
 && install -D -m 0755 target/release/sluice-rocketmq /opt/rocketmq/bin/sluice-rocketmq

FROM debian:bookworm-slim
ARG ROCKETMQ_VERSION=1.0.0
LABEL org.opencontainers.image.version="${ROCKETMQ_VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/sluice-llm/sluice"
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends zlib1g \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 rocketmq \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/rocketmq --create-home rocketmq
# By upstream's two names; the name server's is a symlink, so the image
# carries the binary once.
COPY --from=build /opt/rocketmq/bin/sluice-rocketmq /usr/local/bin/rocketmq-broker-rust
RUN ln -s rocketmq-broker-rust /usr/local/bin/rocketmq-namesrv-rust
COPY lite-topic/broker/namesrv.toml.in lite-topic/broker/broker.toml.in /opt/sluice/broker/
COPY deploy/docker/rocketmq-entrypoint.sh /usr/local/bin/rocketmq-entrypoint.sh
USER 10001:10001
VOLUME /var/lib/rocketmq
# Name server 9876; broker remoting 10911 (and its fast port 10909), HA 10912.
EXPOSE 9876 10909 10911 10912
ENTRYPOINT ["/usr/local/bin/rocketmq-entrypoint.sh"]
CMD ["namesrv"]
