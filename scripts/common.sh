# Shared helpers for the project's scripts. Source it; do not run it.

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ENVOY_VERSION="1.40.0"
KUBERNETES_VALIDATE_VERSION="1.37.0"
# Helm v4.2.3 as a library (scripts/helm): no helm binary is packaged on the
# registries this project installs from.
HELM_PYTHON_SDK_VERSION="0.2.2"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
# The release build of scripts/setup, scripts/install-broker, scripts/demo,
# scripts/soak and scripts/chaos: what ships and the broker, in one cargo
# invocation, one LTO link (each link re-optimises every crate it links,
# minutes each): `sluice` (sluice-rls, sluice-consumer, sluice-allinone, the
# RocketMQ name server and broker, and sluice-llm-sim, in one binary, run by
# those names; scripts/install-broker installs it under the broker's two
# names). Every caller asks for the same packages:
# cargo unifies dependency features across the packages asked for, so a
# different set (`-p sluice-broker` alone, the demo alone) would build the
# shared crates again. `-p sluice-demo` is in the set for that reason only:
# none of its targets is built here, and scripts/demo's `--bin sluice-demo`
# then builds the demo alone.
RELEASE_PACKAGES=(-p sluice-bins -p sluice-llm-sim -p sluice-broker -p sluice-demo)
# Explicit --bin flags: cargo cannot mix --bins with --bin (scripts/demo adds one).
RELEASE_BINS=(--bin sluice)
# The names `sluice` answers to: release_build makes each a hard link to
# target/release/sluice, where the scripts, benchmarks and images look
# (sluice-rocketmq runs the name server or the broker by the name it is
# installed under: scripts/install-broker).
SLUICE_PROGRAMS=(sluice-rls sluice-consumer sluice-allinone sluice-rocketmq sluice-llm-sim)

# The release build above, then target/release/{sluice-rls,sluice-consumer,
# sluice-allinone,sluice-rocketmq,sluice-llm-sim} as hard links to
# target/release/sluice, each replaced at once (linked beside, then renamed
# over). Extra arguments go to cargo
# (scripts/demo: --bin sluice-demo). A later `cargo build --release -p
# sluice-bins --bins` writes real binaries over the links (cargo removes a
# file before it writes one): harmless, the same programs.
release_build() {
  cargo build --release --locked "${RELEASE_PACKAGES[@]}" "${RELEASE_BINS[@]}" "$@" || return
  local release="$TARGET_DIR/release" name
  for name in "${SLUICE_PROGRAMS[@]}"; do
    # Already this build (a second call after a fresh build): GNU mv refuses
    # to move a link over another link of the same file.
    [ "$release/$name" -ef "$release/sluice" ] && continue
    ln -f "$release/sluice" "$release/.$name.new" || return
    mv -f "$release/.$name.new" "$release/$name" || return
  done
}
# The Hugging Face tokenizer.json files and their reference ids
# (scripts/fetch-hf-tokenizers): a cache beside cargo's, outside the checkout,
# so a fresh clone on the same machine does not fetch and generate them again.
HF_TOKENIZERS_DIR="${SLUICE_HF_TOKENIZERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice/hf-tokenizers}"

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Run as root directly, else through sudo when there is one.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo "$@"
  else die "need root (or sudo) to run: $*"
  fi
}

# The envoy binary: $ENVOY_BIN, PATH, or pip's scripts folder.
find_envoy() {
  if [ -n "${ENVOY_BIN:-}" ] && [ -x "$ENVOY_BIN" ]; then echo "$ENVOY_BIN"; return; fi
  local scripts
  scripts="$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))' 2>/dev/null || true)"
  if [ -n "$scripts" ] && [ -x "$scripts/envoy" ]; then echo "$scripts/envoy"; return; fi
  scripts="$(python3 -c 'import site; print(site.USER_BASE)' 2>/dev/null || true)/bin"
  if [ -x "$scripts/envoy" ]; then echo "$scripts/envoy"; return; fi
  command -v envoy 2>/dev/null || true
}

# pip install of the requirements given, into the user's Python (falling back
# to --break-system-packages where Debian's Python refuses); pyenv's shims
# then learn the new scripts.
pip_install() {
  python3 -m pip install --quiet --disable-pip-version-check "$@" \
    || python3 -m pip install --quiet --disable-pip-version-check --break-system-packages "$@"
  command -v pyenv >/dev/null 2>&1 && pyenv rehash || true
}

# A script pip installed ($1): PATH, or pip's scripts folders.
find_pip_script() {
  local dir
  for dir in "$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))' 2>/dev/null || true)" \
             "$(python3 -c 'import site; print(site.USER_BASE)' 2>/dev/null || true)/bin"; do
    if [ -n "$dir" ] && [ -x "$dir/$1" ]; then echo "$dir/$1"; return; fi
  done
  command -v "$1" 2>/dev/null || true
}

# A warning, not a stop, when the file system of the target dir has less
# than $1 GB free: a build that runs out of disk fails deep inside rustc
# ("IO failure on output stream: No space left on device") after minutes of
# work. $1 is what a build into an empty target dir writes (an existing one
# needs less), $2 what for.
warn_if_low_disk() {
  local need_gb="$1" what="$2" dir="$TARGET_DIR" free_gb
  while [ ! -d "$dir" ]; do dir="$(dirname "$dir")"; done
  free_gb="$(df --output=avail -B1G "$dir" 2>/dev/null | tail -n 1 | tr -d ' ')"
  case "$free_gb" in '' | *[!0-9]*) return 0 ;; esac
  if [ "$free_gb" -lt "$need_gb" ]; then
    printf '\033[1mwarning:\033[0m %s GB free under %s; %s into an empty target dir writes about %s GB\n' \
      "$free_gb" "$dir" "$what" "$need_gb" >&2
  fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}
