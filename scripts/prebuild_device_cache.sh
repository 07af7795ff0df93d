#!/usr/bin/env bash
# Builds the GPU machine's Triton cache on this CPU-only machine from recorded compile requests, as a tarball to
# carry there (so a device call compiles no kernels), and checks on the device that the cache is hit.
#
#   scripts/prebuild_device_cache.sh [-o .gpu/tcache.tgz] [-j JOBS] [-w WORKDIR] [-x N:DIR]... RECORD_DIR...  # here
#   scripts/prebuild_device_cache.sh --check RECORD_DIR...                                           # on the device
#
# RECORD_DIR: TRITON_DIST_COMPILE_RECORD folders of device runs (runtime/compile_record.py), e.g.
# .gpu/compiles-pool-np2. Build steps, into WORKDIR (default /tmp/tcache-prebuild, emptied first) as TRITON_CACHE_DIR:
#  1. `python -m triton_dist.tools.precompile --jobs JOBS` (all requests, in parallel, deduplicated);
#  2. an ordered pass: each recording file (= one device process) replayed in its own fresh process, in the recorded
#     order. Needed because Triton 3.6's JIT key of a kernel depends on which kernels' keys that process computed
#     before: DependenciesFinder._update_hash merges a callee's used_global_vals BEFORE computing the callee's
#     cache_key, so a callee's constexpr globals (e.g. flash_attention.LN2 used by finish_rows) enter a caller's key
#     only when some earlier kernel already hashed that callee. Step 1's processes see another history than the
#     device's; this pass reproduces the device's (mostly cache hits; it compiles only the other variants);
#  3. the same pass builds the C launcher of every kernel and cuda_utils (Triton compiles them with gcc at first
#     load: ~0.3-1.3 s each) against an empty libcuda.so.1 stub; keyed by (C source, platform) only. A launcher that
#     fails to load on the device is rebuilt there by Triton (it catches the ImportError);
#  4. tar czf OUT of WORKDIR's contents (relative paths) plus triton_dist/prebuild-fingerprint.txt.
# -x N:DIR (repeatable): also compile DIR's requests of kernels with a WORLD constexpr for N ranks (tools/precompile
# --world N, after step 1): a guess for a rank count that has no recording of its own yet (e.g. -x 4:DIR_OF_NP2 for
# the tests a cut 4-rank run did not reach). Not in the ordered pass (no recorded history for them).
# Requirements: PY (default /opt/torch/.venv/bin/python) must be the device's stack: CPython 3.12 (patch level does
# not enter any key), triton==3.6.0 (the cp312 wheel: Triton's key hashes its own .py files and libtriton .so),
# nvidia-nvshmem-cu13==3.4.5 (its bitcode names and fills the slim library, hashed by content), torch 2.11.0 only to
# import test modules that record kernels (torch enters no key). gcc for step 3. Paths (repo, venv, cache dir) do
# not enter the key (extern_libs are hashed by content), but the slim library must lie in the device's
# $TRITON_CACHE_DIR/triton_dist, which the tarball provides.
#
# On the device, before the job (TRITON_CACHE_DIR=/tmp/tcache; carry .gpu):
#   mkdir -p /tmp/tcache && tar xzf .gpu/tcache.tgz -C /tmp/tcache
#   scripts/prebuild_device_cache.sh --check .gpu/compiles-pool-np2   # "keys present: N/N" = every request will hit
# and afterwards: scripts/gpu_call.sh's "cache entries at start/end" must not grow (a miss adds a directory).
# --check computes, per recorded request, the key the device's JIT computes (this machine's Triton, ptxas, env
# knobs, NVSHMEM library; each file's history in a fresh process, nothing compiled) and counts those present; it also
# diffs this machine's fingerprint against the shipped one. Env: PY, TRITON_CACHE_DIR (default /tmp/tcache).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PY=${PY:-/opt/torch/.venv/bin/python}
[[ $# -eq 0 || $1 == -h || $1 == --help ]] && { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0; }

# ---- the per-process pass (python), shared by the build and --check -------------------------------------------
# argv: MODE (build|check) FILE ; prints one line per request: "OK|MISS|FAIL <dir> <kernel>"
read -r -d '' PASS_PY <<'EOF' || true
import hashlib, json, os, sys, sysconfig, tempfile
mode, path = sys.argv[1], sys.argv[2]
import triton_dist  # noqa: F401  (the hooks every compile goes through)
from triton_dist import _compat
from triton_dist.jit import _bounded_wait_env
from triton_dist.runtime import compile_record as cr
from triton._C.libtriton import get_cache_invalidating_env_vars
from triton.compiler.compiler import make_backend
from triton.runtime.cache import _base32, get_cache_key, get_cache_manager
cache = os.environ["TRITON_CACHE_DIR"]
reqs, _ = cr.load_requests([path])
launchers = set()
for rec in reqs:
    name = f"{rec['kernel']['module']}:{rec['kernel']['qualname']}"
    try:
        if mode == "build":
            k = cr.compile_request(rec)  # cache hit, or the history-dependent variant
            src = k.src
            consts = {((src.fn.arg_names.index(x), ) if isinstance(x, str) else x): v for x, v in src.constants.items()}
            from triton.backends.nvidia import driver as nvd
            launchers.add(nvd.make_launcher(consts, dict(src.signature), getattr(k.metadata, "tensordesc_meta", None)))
            print("OK", k.hash[:12], name, flush=True)
            continue
        # check: the key the JIT computes for this launch (recorded options as-is: the device's paths)
        fn = cr.kernel_of(rec["kernel"])
        os.environ[_bounded_wait_env()] = rec["bounded_wait"] or ""
        backend_name, arch, ws = rec["target"]
        backend = make_backend(_compat.gpu_target(backend_name, cr.decode(arch), ws))
        opts = backend.parse_options(dict(backend.parse_options(cr.decode(rec["options"])).__dict__))
        src = _compat.ast_source(fn, cr.decode(rec["signature"]), cr.decode(rec["constexprs"]), cr.decode(rec["attrs"]))
        h = hashlib.sha256(get_cache_key(src, backend, opts, get_cache_invalidating_env_vars()).encode()).hexdigest()
        d = _base32(h)
        # a hit as Triton's compile() sees it: the group file's children (absolute paths) must exist, the metadata
        # json and the binary among them (a group naming another machine's paths is a silent miss)
        meta = f"{src.name[:150]}.json"
        try:  # FileCacheManager.get_group's reading, without its making the directory of a miss
            with open(os.path.join(cache, d, f"__grp__{meta}")) as f:
                group = {c: p for c, p in json.load(f)["child_paths"].items() if os.path.exists(p)}
        except (OSError, ValueError, KeyError):
            group = dict()  # (no empty brace pair in this text: xargs -I substitutes it)
        ok = meta in group and any(c.endswith((".cubin", ".hsaco")) for c in group)
        print("OK" if ok else "MISS", d[:12], name, flush=True)
    except Exception as exc:
        print("FAIL", "-", name, type(exc).__name__, " ".join(str(exc).split())[:200], flush=True)
if mode == "build":  # C launchers + cuda_utils, built as compile_module_from_src would, without loading them
    from triton.backends.nvidia import driver as nvd
    from triton.runtime.build import _build, platform_key
    srcs = [(s, "__triton_launcher") for s in sorted(launchers)]
    srcs.append((open(os.path.join(nvd.dirname, "driver.c")).read(), "cuda_utils"))
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    built = 0
    for s, name in srcs:
        mgr = get_cache_manager(hashlib.sha256((s + platform_key()).encode("utf-8")).hexdigest())
        if mgr.get_file(f"{name}{suffix}") is not None:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            c = os.path.join(tmp, name + ".c")
            with open(c, "w") as f:
                f.write(s)
            so = _build(name, c, tmp, nvd.library_dirs(), nvd.include_dirs, nvd.libraries, [])
            with open(so, "rb") as f:
                mgr.put(f.read(), f"{name}{suffix}", binary=True)
        built += 1
    print("LAUNCHERS", len(srcs), "built", built, flush=True)
EOF
read -r -d '' FINGERPRINT_PY <<'EOF' || true
import hashlib, os, sys, platform
import triton
from triton.runtime.cache import triton_key
from triton.backends.nvidia.compiler import get_ptxas_version, CUDAOptions
from triton._C.libtriton import get_cache_invalidating_env_vars
import triton_dist
from triton_dist.jit import lowering_fingerprint, shmem_extern_libs
def fh(p):
    return hashlib.sha256(open(p, "rb").read()).hexdigest()[:16]
print("triton", triton.__version__, "triton_key", hashlib.sha256(triton_key().encode()).hexdigest()[:16])
print("ptxas", " ".join(get_ptxas_version(90).split()[-4:]))
print("libdevice", fh(dict(CUDAOptions().extern_libs)["libdevice"]))
for lvl in ("slim", "wide"):
    p = shmem_extern_libs("cuda", 90, lvl).get("libnvshmem_device")
    print("nvshmem", lvl, os.path.basename(p or "-"), fh(p) if p else "-")
print("triton_dist lowering", lowering_fingerprint())
print("cache-invalidating env", sorted(get_cache_invalidating_env_vars().items()))
print("python", platform.python_version(), "(not in any key)")
EOF

export PYTHONPATH="$REPO/python:$REPO/test/python${PYTHONPATH:+:$PYTHONPATH}"
export TRITON_DIST_COMPILE_RECORD=  # never record the replay itself

# one fresh process per distinct recording file (identical files once), JOBS at a time
pass_files() {  # pass_files MODE JOBS RECORD_DIR...
  local mode=$1 jobs=$2; shift 2
  find "$@" -name '*.jsonl' -print0 | xargs -0 md5sum | sort -k1,1 -u | awk '{print $2}' | sort \
    | xargs -P "$jobs" -I{} "$PY" -c "$PASS_PY" "$mode" {}
}

if [[ $1 == --check ]]; then
  shift
  export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/tcache}
  shipped=$TRITON_CACHE_DIR/triton_dist/prebuild-fingerprint.txt
  here=$(mktemp)
  "$PY" -c "$FINGERPRINT_PY" > "$here" 2>/dev/null
  if [[ -f $shipped ]]; then
    diff <(grep -v '^python' "$shipped") <(grep -v '^python' "$here") > /dev/null \
      && echo "fingerprint: same as the prebuilt cache's" \
      || { echo "fingerprint DIFFERS (prebuilt < > here):"; diff "$shipped" "$here"; }
  else
    echo "no $shipped: was the tarball extracted into $TRITON_CACHE_DIR?"; cat "$here"
  fi
  rm -f "$here"
  lines=$(pass_files check 1 "$@" 2>/dev/null || true)
  grep -v '^OK' <<< "$lines" | sort -u | head -20 || true
  echo "keys present: $(grep -c '^OK' <<< "$lines" || true)/$(grep -c '^\(OK\|MISS\|FAIL\)' <<< "$lines" || true)" \
    "(requests of each recording file; duplicates across files counted again)"
  exit 0
fi

OUT=.gpu/tcache.tgz JOBS=$(( $(nproc) > 1 ? $(nproc) : 1 )) WORK=/tmp/tcache-prebuild WORLDS=()
while getopts "o:j:w:x:" opt; do
  case $opt in o) OUT=$OPTARG ;; j) JOBS=$OPTARG ;; w) WORK=$OPTARG ;; x) WORLDS+=("$OPTARG") ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
(( $# )) || { echo "no RECORD_DIR given" >&2; exit 2; }
"$PY" - <<'EOF'
import sys, importlib.metadata as md
want = {"triton": "3.6.0", "nvidia-nvshmem-cu13": "3.4.5"}
have = {p: md.version(p) for p in want}
print(f"python {sys.version.split()[0]}, " + ", ".join(f"{p} {v}" for p, v in have.items()))
bad = [p for p in want if have[p] != want[p]] + ([] if sys.version_info[:2] == (3, 12) else ["python 3.12"])
sys.exit(f"not the device's stack: {bad}" if bad else 0)
EOF
rm -rf "$WORK"; mkdir -p "$WORK"
export TRITON_CACHE_DIR=$WORK
STUB=$(mktemp -d)  # an empty libcuda.so.1: the launchers link it by name (-l:libcuda.so.1); the device's is loaded
echo "" > "$STUB/e.c" && gcc -shared -fPIC -o "$STUB/libcuda.so.1" "$STUB/e.c"
export TRITON_LIBCUDA_PATH=$STUB
t0=$SECONDS
"$PY" -m triton_dist.tools.precompile "$@" --jobs "$JOBS" --path "$REPO/test/python" | tail -5 || true
for spec in "${WORLDS[@]}"; do
  [[ $spec =~ ^[0-9]+:.+ ]] || { echo "-x $spec: expected N:DIR" >&2; exit 2; }
  "$PY" -m triton_dist.tools.precompile "${spec#*:}" --world "${spec%%:*}" --jobs "$JOBS" --path "$REPO/test/python" \
    | tail -2 || true
done
n1=$(find "$WORK" -mindepth 1 -maxdepth 1 -type d | wc -l)
lines=$(pass_files build "$JOBS" "$@" || true)
grep '^FAIL' <<< "$lines" | sort -u || true
n2=$(find "$WORK" -mindepth 1 -maxdepth 1 -type d | wc -l)
echo "ordered pass: $(grep -c '^OK' <<< "$lines" || true) requests replayed in recorded order," \
  "$((n2 - n1)) cache entries added (history-dependent key variants + launchers): $(grep '^LAUNCHERS' <<< "$lines" \
  | awk '{b += $4} END {print b + 0}') launchers / cuda_utils built"
rm -rf "$STUB"
"$PY" -c "$FINGERPRINT_PY" > "$WORK/triton_dist/prebuild-fingerprint.txt"
mkdir -p "$(dirname "$OUT")"
# What a cache hit needs on the device: the metadata json, the binary and the TTIR (runtime/cooperative.py reads
# the extern calls from it); the other stages (~85% of the bytes) go. Triton's group files name their children by
# ABSOLUTE path: rewritten to the device's cache directory (DEVICE_CACHE, default /tmp/tcache) and to the files
# kept, else every entry is a silent miss there (found 2026-12-06 before any device use).
find "$WORK" -mindepth 2 -maxdepth 2 -type f \( -name '*.llir' -o -name '*.ttgir' -o -name '*.source' -o -name '*.ptx' \
  -o -name '*.amdgcn' \) -delete
"$PY" - "$WORK" "${DEVICE_CACHE:-/tmp/tcache}" <<'EOF'
import glob, json, os, sys
work, device = sys.argv[1], sys.argv[2]
for grp in glob.glob(os.path.join(work, "*", "__grp__*.json")):
    d = os.path.dirname(grp)
    children = json.load(open(grp))["child_paths"]
    kept = {c: os.path.join(device, os.path.basename(d), c) for c in children if os.path.exists(os.path.join(d, c))}
    with open(grp, "w") as f:
        json.dump({"child_paths": kept}, f)
EOF
tar czf "$OUT" -C "$WORK" .
echo "$OUT: $(du -h "$OUT" | cut -f1) ($(du -sh "$WORK" | cut -f1) unpacked, $(ls "$WORK" | wc -l) cache entries)" \
  "in $((SECONDS - t0)) s"
echo "device: mkdir -p /tmp/tcache && tar xzf $OUT -C /tmp/tcache && scripts/prebuild_device_cache.sh --check $*"
