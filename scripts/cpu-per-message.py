#!/usr/bin/env python3
"""CPU per message of each process on the deferral path, in consumer_bench's
consume phase (docs/benchmarks.md, "CPU per message, again"). Usage:

    scripts/cpu-per-message.py [BUCKETS] [PER_BUCKET]    # default 1000 5

Runs consumer_bench (release, in $CARGO_TARGET_DIR or the checkout's
target/: `cargo build --release -p sluice-bench --bin consumer_bench`)
with SECTIONS=scale, and from its
"starting the consumer" line to its exit reads utime + stime of the bench,
its redis-server, broker and name server from /proc every 0.2 s (a process
that exits keeps its last reading). Bounded by the bench's own timeout.
"""
import os
import subprocess
import sys
import threading
import time

TICKS = os.sysconf("SC_CLK_TCK")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")),
                     "release", "consumer_bench")
# The bench's children, by the name each program is started under.
CHILDREN = ["redis-server", "rocketmq-broker-rust", "rocketmq-namesrv-rust"]


def cpu_seconds(pid):
    """utime + stime of `pid`, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS
    except (OSError, IndexError, ValueError):
        return None


def pids_named(name):
    """Processes whose program (first argument, by base name) is `name`:
    /proc's comm is cut at 15 characters, the broker's name is not. Redis
    rewrites its arguments into one title ("redis-server 127.0.0.1:PORT")."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                title = cmdline.read().split(b"\0")[0].decode(errors="replace")
            program = title.split(" ")[0]
        except OSError:
            continue
        if os.path.basename(program) == name:
            found.append(int(entry))
    return found


def positive(index, default):
    """Argument `index` as a count of at least 1, else `default` when absent."""
    if len(sys.argv) <= index:
        return default
    if not sys.argv[index].isdigit() or int(sys.argv[index]) < 1:
        sys.exit(f"usage: {sys.argv[0]} [BUCKETS] [PER_BUCKET]: "
                 f"'{sys.argv[index]}' is not a count of at least 1")
    return int(sys.argv[index])


def main():
    buckets, per_bucket = positive(1, 1000), positive(2, 5)
    if not os.access(BENCH, os.X_OK):
        sys.exit(f"no {BENCH}: cargo build --release -p sluice-bench --bin consumer_bench")
    env = dict(os.environ, SECTIONS="scale",
               SCALE_BUCKETS=str(buckets), SCALE_PER_BUCKET=str(per_bucket))
    bench = subprocess.Popen([BENCH], env=env, cwd=ROOT, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(bench.stdout), daemon=True)
    reader.start()
    first, latest, started, ended = {}, {}, None, None
    while bench.poll() is None:
        if started is None and any("starting the consumer" in line for line in lines):
            started = time.time()
            groups = {"bench": [bench.pid]}
            groups.update({name: pids_named(name) for name in CHILDREN})
            first = {g: {pid: cpu_seconds(pid) or 0.0 for pid in pids}
                     for g, pids in groups.items()}
            latest = {g: dict(readings) for g, readings in first.items()}
        if started is not None:
            for readings in latest.values():
                for pid in readings:
                    now = cpu_seconds(pid)
                    if now is not None:
                        readings[pid] = now
            ended = time.time()
        time.sleep(0.2)
    reader.join(timeout=5)
    sys.stdout.write("".join(line for line in lines if line.startswith(
        ("answered", "admits/s", "order inside", "redis per message"))))
    if started is None:
        sys.exit("consumer_bench never started its consumer: its output above")
    messages = buckets * per_bucket
    total = 0.0
    for group, readings in first.items():
        spent = sum(latest[group][pid] - readings[pid] for pid in readings)
        total += spent
        print(f"{group:24} {spent:6.2f} CPU-s {1000 * spent / messages:7.3f} ms/message")
    print(f"{'all':24} {total:6.2f} CPU-s {1000 * total / messages:7.3f} ms/message"
          f" over {ended - started:.1f} s")


if __name__ == "__main__":
    main()
