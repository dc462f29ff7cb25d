#!/usr/bin/env python3
"""Production functions over N lines (default 80) in the workspace (issue 26:
none without a comment above it saying why it stays long). Usage:
scripts/long-functions.py [ROOT] [N].
Skips tests/, benches, examples, fuzz, and `#[cfg(test)]` modules. Reports
whether a comment right above the fn (doc or //) mentions 'long'."""
import os, re, sys
root = sys.argv[1] if len(sys.argv) > 1 else '.'
limit = int(sys.argv[2]) if len(sys.argv) > 2 else 80
skip_dirs = {'target', 'tests', 'examples', 'benches', 'fuzz', '.git', 'bench', 'demo', 'node_modules'}
fn_re = re.compile(r'^(\s*)(pub(\([^)]*\))?\s+)?(async\s+)?(const\s+)?(unsafe\s+)?fn\s+(\w+)')
out = []
for dp, dns, fns in os.walk(root):
    dns[:] = [d for d in dns if d not in skip_dirs and not d.startswith('target')]
    for f in fns:
        if not f.endswith('.rs'):
            continue
        path = os.path.join(dp, f)
        if '/src/bin/' in path or path.endswith('build.rs'):
            continue
        lines = open(path, encoding='utf-8', errors='replace').read().split('\n')
        in_test_from = None
        i = 0
        while i < len(lines):
            line = lines[i]
            if re.match(r'\s*#\[cfg\(test\)\]', line):
                break  # test module: rest of file (convention: at the end)
            m = fn_re.match(line)
            if m and not line.rstrip().endswith(';'):
                indent = m.group(1)
                # find the line that closes at the same indent
                j = i
                while j < len(lines) and not lines[j].rstrip().endswith('{') and '{' not in lines[j]:
                    j += 1
                k = j + 1
                while k < len(lines) and not (lines[k].startswith(indent + '}') and (len(lines[k]) == len(indent) + 1 or lines[k][len(indent)+1] in ' ;)')):
                    k += 1
                n = k - i + 1
                if n > limit:
                    above = '\n'.join(lines[max(0, i-6):i]).lower()
                    why = 'long' in above
                    out.append((n, path, i + 1, m.group(7), why))
                i += 1
                continue
            i += 1
out.sort(reverse=True)
for n, p, l, name, why in out:
    print(f"{n:5d} {p}:{l} {name}{'  (says why)' if why else ''}")
print(f"total {len(out)}, without a why: {sum(1 for o in out if not o[4])}", file=sys.stderr)
