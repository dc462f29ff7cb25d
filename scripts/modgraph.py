#!/usr/bin/env python3
"""File-level dependency graph of a Rust library crate from its `crate::` /
`super::` paths (production code only: `#[cfg(test)] mod tests` and comments
are left out). Re-exports (`pub use`) are followed to the file that defines
the item. Prints every edge and every cycle (strongly connected component).

usage: modgraph.py <crate>/src [--dot]
"""
import os, re, sys

root = sys.argv[1]
files = {}  # module path tuple -> file
for d, _, fs in os.walk(root):
    for f in fs:
        if not f.endswith('.rs'):
            continue
        p = os.path.relpath(os.path.join(d, f), root)
        if p == 'main.rs' or p.startswith('bin/'):
            continue
        parts = p[:-3].split(os.sep)
        if parts == ['lib']:
            parts = []
        elif parts[-1] == 'mod':
            parts = parts[:-1]
        files[tuple(parts)] = p

def strip(text):
    """Code only: the unit tests (always at the end of a file here),
    comments, string and char literals are blanked."""
    m = re.search(r'^\s*#\[cfg\(test\)\]\s*\n([ \t]*#\[[^\n]*\n)*\s*(pub\s+)?mod\s+\w*tests?\b', text, re.M)
    if m:
        text = text[:m.start()]
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            i = n if j < 0 else j
        elif text.startswith('/*', i):
            j = text.find('*/', i)
            i = n if j < 0 else j + 2
        elif c == 'r' and re.match(r'r#*"', text[i:i + 10]) and not (i and (text[i - 1].isalnum() or text[i - 1] == '_')):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            j = text.find('"' + hashes, i + len(hashes) + 2)
            i = n if j < 0 else j + 1 + len(hashes)
            out.append('""')
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == '\\' else 1
            i = j + 1
            out.append('""')
        elif c == "'" and i + 2 < n and (text[i + 1] == '\\' or text[i + 2] == "'"):
            j = text.find("'", i + 2 if text[i + 1] != '\\' else i + 3)
            i = n if j < 0 else j + 1
            out.append("' '")
        else:
            out.append(c)
            i += 1
    return ''.join(out)

def expand(tree):
    """'a::{b, c::{d, e}}' -> ['a::b', 'a::c::d', 'a::c::e']"""
    tree = re.sub(r'\s+as\s+', '@', tree)
    tree = re.sub(r'\s+', '', tree)
    i = tree.find('{')
    if i < 0:
        return [tree]
    prefix, body = tree[:i], tree[i + 1:tree.rfind('}')]
    items, depth, cur = [], 0, ''
    for ch in body:
        if ch == ',' and depth == 0:
            items.append(cur); cur = ''; continue
        depth += ch == '{'; depth -= ch == '}'
        cur += ch
    items.append(cur)
    out = []
    for it in items:
        if not it:
            continue
        for e in expand(it):
            out.append(prefix + e if e != 'self' else prefix.rstrip(':'))
    return out

texts = {m: strip(open(os.path.join(root, p)).read()) for m, p in files.items()}
USE = re.compile(r'\b(pub(\([^)]*\))?\s+)?use\s+([^;]+);')
reexports = {m: {} for m in files}  # module -> name -> absolute path (list) or None (external)
uses = {m: [] for m in files}

def absolute(mod, path):
    segs = path.split('::')
    if segs[0] == 'crate':
        return list(segs[1:])
    if segs[0] in ('super', 'self'):
        base = list(mod)
        while segs and segs[0] in ('super', 'self'):
            if segs[0] == 'super':
                base = base[:-1]
            segs = segs[1:]
        return base + segs
    # a child module of this one, used without `self::`
    if tuple(mod) + (segs[0],) in files:
        return list(mod) + segs
    return None  # external crate

for m, t in texts.items():
    for um in USE.finditer(t):
        for path in expand(um.group(3)):
            alias = None
            am = re.match(r'(.*)@(\w+)$', path)
            if am:
                path, alias = am.group(1), am.group(2)
            a = absolute(m, path)
            if um.group(1):
                reexports[m][alias or path.split('::')[-1]] = a
            if a is not None:
                uses[m].append(a)
    for pm in re.finditer(r'(?<![\w:])((?:crate|super)(?:::\w+)+)', t):
        uses[m].append(absolute(m, pm.group(1)))

def resolve(segs, depth=0):
    cur = ()
    for i, s in enumerate(segs):
        if cur + (s,) in files:
            cur = cur + (s,)
            continue
        if s in reexports.get(cur, {}) and depth < 20:
            target = reexports[cur][s]
            if target is None:
                return None
            return resolve(target + list(segs[i + 1:]), depth + 1)
        break
    return cur

edges = {}
for m in files:
    for u in uses[m]:
        if u is None:
            continue
        r = resolve(u)
        if r is None or r == m:
            continue
        edges.setdefault(files[m], set()).add(files[r])

# Tarjan
index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]
nodes = sorted(files.values())
sys.setrecursionlimit(10000)
def strong(v):
    index[v] = low[v] = counter[0]; counter[0] += 1
    stack.append(v); on.add(v)
    for w in sorted(edges.get(v, ())):
        if w not in index:
            strong(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v:
                break
        sccs.append(sorted(comp))
for v in nodes:
    if v not in index:
        strong(v)

if '--dot' in sys.argv:
    print('digraph consumer {')
    for a in sorted(edges):
        for b in sorted(edges[a]):
            print(f'  "{a}" -> "{b}";')
    print('}')
else:
    for a in nodes:
        print(f'{a:28} -> {", ".join(sorted(edges.get(a, ()))) or "(leaf)"}')
cycles = [c for c in sccs if len(c) > 1]
print(f'# {len(nodes)} files, {sum(len(e) for e in edges.values())} edges, {len(cycles)} cycle(s)')
for c in cycles:
    print(f'# cycle of {len(c)} files: {" ".join(c)}')
