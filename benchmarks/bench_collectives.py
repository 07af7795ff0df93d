"""Benchmark triton_dist collectives against NCCL and torch's symmetric-memory ops in the same run.

    scripts/launch.sh --nproc_per_node 2 benchmarks/bench_collectives.py [--quick] [--ops all_reduce,all_gather,...]
        [--dtypes bfloat16,float32] [--write-table [--table-out PATH]] [--eager-max-bytes N] [--no-symm]
    python benchmarks/bench_collectives.py --table-from RESULTS.json [--table-out PATH]      # no GPU needed

For every op, size and implementation (each of our methods, ``auto``, NCCL, torch symm-mem): a correctness check
against NCCL's result first, then timing. Each timed sample is a CUDA-graph replay of ``k`` back-to-back calls
(``k`` up to 200 at small sizes, 1 from 256 MiB) measured with CUDA events (graphs for all, so host launch overhead is
excluded); every sample starts after a barrier and a device-side rendezvous, so the ranks' GPUs begin it together
(``benchmarks/harness.py``), and the samples of one size are interleaved round-robin over NCCL and every
implementation; the reported latency is the median over samples divided by ``k``, max over ranks (``us`` /
``nccl_us``). Up to ``--eager-max-bytes`` (default 1 MiB) every
implementation is also timed eagerly, host launch overhead included (``eager_us`` / ``nccl_eager_us``).

torch symmetric-memory baselines (GPU only, rows ``method="torch_symm/<op>"``, ``baseline: true``; never multicast:
no ``multimem_*`` op is used): all_reduce ``one_shot_all_reduce`` and ``two_shot_all_reduce_`` (in place), all_gather
``_low_contention_all_gather``, reduce_scatter ``reduce_scatter_out`` and ``_low_contention_reduce_scatter``, each
where the installed torch has it (the JSON's ``torch_symm`` records the schemas, or ``unavailable: <why>``). Inputs
are symmetric tensors (``_symmetric_memory.empty`` + ``rendezvous``).

``auto_over_best`` (on each ``auto`` row): auto's time over the fastest of our methods and NCCL at that size; the
worst is printed at the end and stored as ``auto_check``. ``--write-table`` (rank 0) derives the measured dispatch
table ``python/triton_dist/ops/collectives_table.json`` (or ``--table-out``) from this run's graph timings
(``triton_dist.ops.collectives.build_table``: entries this run did not measure are kept); ``--table-from JSON``
does the same from a committed results JSON and exits.
Sizes are the NCCL-tests convention: all_gather = output bytes, reduce_scatter = input bytes, all_reduce = buffer
bytes. busbw: all_gather / reduce_scatter ``S / t * (W - 1) / W``; all_reduce ``2 * S / t * (W - 1) / W``.
"auto" is the public API's default choice (it may fall back to NCCL, reported as such).

Ranks that share a GPU (``TRITON_DIST_RANKS_PER_GPU`` > 1, CUDA MPS; the JSON's ``shared_gpu``: true, its
``topology`` says how many): the process group has no NCCL, so there is no NCCL column: ``nccl_us`` is null with
``nccl_unavailable`` saying why, and the same collective through ``triton_dist.runtime.torch_collectives`` (gloo on
host copies, which cannot be captured into a CUDA graph) is the correctness reference and is timed eagerly only, as
``gloo_host_us`` (k <= 20 calls per sample, <= 10 samples); no speed-up is computed against it. The torch
symmetric-memory baselines are skipped (the reason is in ``torch_symm``), ``--write-table`` refuses (shared-GPU
timings measure no NVLink and must never replace the NVLink table), and so does ``--table-from`` on such a results
JSON.
Writes JSON to ``$TRITON_DIST_RESULTS_DIR`` (default benchmarks/results/). Timing, capture and the JSON header:
``benchmarks/harness.py``. ``--probe host-path [options]`` (the first option): where an eager call's host
microseconds go, instead of the bench (``benchmarks/collectives_probes.py``; ``--probe host-path --help``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

os.environ.setdefault("NVSHMEM_SYMMETRIC_SIZE", "20G")
os.environ.setdefault("TRITON_DIST_SIM_SYMMETRIC_SIZE", "256M")  # simulator smoke runs
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")  # the symm-mem baselines: never multicast

import torch  # noqa: E402
import harness  # noqa: E402
from harness import capture_agreed, eager_median_us, interleaved_medians  # noqa: E402
from provenance import topology, topology_line  # noqa: E402
from triton_dist.runtime import torch_collectives as TC  # noqa: E402
import torch.distributed as dist  # noqa: E402

KB, MB, GB = 1 << 10, 1 << 20, 1 << 30
FULL_SIZES = [4 * KB, 8 * KB, 16 * KB, 64 * KB, 256 * KB, 1 * MB, 4 * MB, 16 * MB, 64 * MB, 256 * MB, 1 * GB]
QUICK_SIZES = [4 * KB, 8 * KB, 64 * KB, 1 * MB, 16 * MB, 256 * MB]
METHODS = {
    "all_gather": ["push", "pull", "push_pipe", "ll", "ce", "auto"],
    "reduce_scatter": ["direct", "direct_push", "push_pipe", "ll", "ring", "auto"],
    "all_reduce": ["one_shot", "two_shot", "two_shot_pipe", "ll", "auto"],
}
#: torch symmetric-memory ops timed as baselines, per op (the first of each alternative group the torch has).
SYMM_OPS = {
    "all_reduce": [("one_shot", ["one_shot_all_reduce"]), ("two_shot", ["two_shot_all_reduce_"])],
    "all_gather": [("low_contention", ["_low_contention_all_gather"])],
    "reduce_scatter": [("reduce_scatter_out", ["reduce_scatter_out"]),
                       ("low_contention", ["_low_contention_reduce_scatter"])],
}
GPU = torch.cuda.is_available()
DEV = "cuda" if GPU else "cpu"  # CPU: simulator smoke run (eager wall-clock timing, gloo as the baseline)
#: why there is no NCCL column where ranks share a GPU
NO_NCCL = ("no NCCL: ranks share a GPU (gloo-only process group; NCCL refuses two ranks on one GPU); the same "
           "collective through torch_collectives (gloo on host copies) is timed eagerly as gloo_host_us")
#: why the torch symmetric-memory baselines are skipped where ranks share a GPU
NO_SYMM = ("skipped: ranks share a GPU (gloo-only process group): torch symmetric memory needs a group with NCCL / "
           "CUDA IPC support")
#: why no dispatch table is written from a shared-GPU run
NO_TABLE = ("refused: ranks share a GPU (CUDA MPS, no NVLink): timings taken there must never replace the NVLink "
            "dispatch table; run on one GPU per rank to write it")


def sync():
    if GPU:
        torch.cuda.synchronize()


def busbw(op, nbytes, us, world):
    if us <= 0:
        return 0.0
    algbw = nbytes / (us * 1e-6) / 1e9
    f = 2 * (world - 1) / world if op == "all_reduce" else (world - 1) / world
    return algbw * f


def eager_us(fn, nbytes, reps):
    """The eager column at ``nbytes``: :func:`harness.time_eager` of ``k = calls_per_sample(nbytes)`` back-to-back
    calls (3 warm-up calls; barrier + device rendezvous before each sample, max over ranks; host launch cost
    included). The simulator (no CUDA): the median wall clock of one call, not a performance figure."""
    if GPU:
        dist.barrier()
        return harness.time_eager(fn, calls_per_sample(nbytes), reps, warmup=3)
    fn()
    dist.barrier()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    dist.barrier()
    times.sort()
    return times[len(times) // 2]


def time_host(fn, nbytes, reps):
    """``gloo_host_us``: median us per call of the host-path baseline (ranks that share a GPU; it synchronises the
    host, so no graph): eager, k <= 20 calls per sample, <= 10 samples (one call moves the whole buffer through the
    host twice: milliseconds at large sizes)."""
    k = max(1, min(20, calls_per_sample(nbytes)))
    fn()
    sync()
    dist.barrier()
    return eager_median_us(fn, k, min(reps, 10))


GRAPH_FAILURES = []
#: ``--probe NAME``: one-off measurements (benchmarks/collectives_probes.py, imported only when one runs: it builds
#: Triton kernels at import)
PROBES = ("host-path", )
#: default of --eager-max-bytes: eager timing (no CUDA graph, host launch overhead included) up to this size
EAGER_MAX_BYTES = 1 * MB


def calls_per_sample(nbytes: int) -> int:
    """``k``: calls per timed sample, so that a sample is long against the start-of-sample skew (up to 200 calls
    for small sizes, one call from 256 MiB up)."""
    return int(max(1, min(200, (256 * MB) // max(nbytes, 1))))


def time_graphs(impls, nbytes, reps, stream) -> dict:
    """``{name: us per call}`` for ``impls = [(name, fn), ...]``: each captured as ``k`` back-to-back calls in one
    CUDA graph, then ``reps`` rounds in which every graph is sampled once (:func:`timing.interleaved_medians`:
    barrier + device rendezvous before each sample, median per implementation, max over ranks). An implementation
    whose capture fails (on any rank) is timed eagerly instead (recorded in GRAPH_FAILURES). CPU: eager wall clock,
    one implementation at a time."""
    if not GPU:
        return {name: eager_us(fn, nbytes, reps) for name, fn in impls}
    k = calls_per_sample(nbytes)
    graphs, out, failed = {}, {}, []
    for name, fn in impls:
        g = capture_agreed(name, fn, k, stream, failures=failed)  # the ranks agree; replayed twice
        if g is None:
            out[name] = eager_us(fn, nbytes, reps)
        else:
            graphs[name] = g
    GRAPH_FAILURES.extend(f"{f['impl']}: {f['error']}"[:300] for f in failed)
    out.update(interleaved_medians({name: g.replay for name, g in graphs.items()}, k, reps))
    torch.cuda.synchronize()
    dist.barrier()
    return out


def symm_setup():
    """``(group_name, {op: [(label, op_name, schema)]}, info)``: the torch symmetric-memory baselines this torch
    offers (no multicast), or ``(None, {}, info)`` with ``info["unavailable"]`` saying why."""
    info = {"env": {"TORCH_SYMM_MEM_DISABLE_MULTICAST": os.environ.get("TORCH_SYMM_MEM_DISABLE_MULTICAST")}}
    if not GPU:
        info["unavailable"] = "unavailable: no CUDA device (simulator run)"
        return None, {}, info
    try:
        import warnings

        import torch.distributed._symmetric_memory as symm

        name = dist.group.WORLD.group_name
        with warnings.catch_warnings():  # deprecated (FutureWarning) in newer torch, required in older
            warnings.simplefilter("ignore", FutureWarning)
            if hasattr(symm, "enable_symm_mem_for_group"):
                symm.enable_symm_mem_for_group(name)
    except Exception as exc:  # noqa: BLE001
        info["unavailable"] = f"unavailable: {type(exc).__name__}: {exc}"[:300]
        return None, {}, info
    found, schemas = {}, {}
    for op, alts in SYMM_OPS.items():
        for label, names in alts:
            for n in names:
                assert not n.startswith("multimem"), n  # multicast stays off
                try:
                    schema = str(getattr(torch.ops.symm_mem, n).default._schema)
                except (AttributeError, RuntimeError) as exc:
                    schemas[n] = f"unavailable: {type(exc).__name__}: {exc}"[:200]
                    continue
                schemas[n] = schema
                found.setdefault(op, []).append((label, n))
                break
    info["schemas"] = schemas
    return name, found, info


def symm_call(op_name, args):
    """Call ``torch.ops.symm_mem.<op_name>`` binding ``args`` (a name -> value dict: input, reduce_op, group_name,
    out, split_last_dim) to its schema's argument names; raises for an argument it cannot fill."""
    fn = getattr(torch.ops.symm_mem, op_name).default
    alias = {"tensor": "input", "inp": "input", "output": "out", "reduceOp": "reduce_op", "group": "group_name"}
    call = {}
    for a in fn._schema.arguments:
        key = alias.get(a.name, a.name)
        if key in args:
            call[a.name] = args[key]
        elif not a.has_default_value():
            raise TypeError(f"symm_mem.{op_name}: cannot fill argument {a.name!r} of {fn._schema}")
    return fn(**call)


def make_symm(op, op_name, gname, x, out, world):
    """The torch symm-mem baseline ``op_name`` for ``op`` on a symmetric copy of ``x``: ``(timed, checked, result,
    buf)``. ``timed`` is the op call alone (what is timed: a user's tensor already in symmetric memory, the op's own
    output); ``checked`` also copies an out-of-place result into ``out`` (``result``) for the correctness check;
    ``buf`` is the symmetric input (``result`` itself for the in-place two-shot)."""
    import torch.distributed._symmetric_memory as symm

    buf = symm.empty(x.numel(), dtype=x.dtype, device=x.device)
    symm.rendezvous(buf, gname)
    buf.copy_(x.reshape(-1))
    wait = getattr(torch.ops, "_c10d_functional", None)
    if op == "all_reduce" and op_name.endswith("_"):  # in place (values grow each call; timing is unaffected)
        def fn():
            symm_call(op_name, {"input": buf, "reduce_op": "sum", "group_name": gname})
        return fn, fn, buf, buf
    if op_name == "reduce_scatter_out":
        def fn():
            symm_call(op_name, {"input": buf, "group_name": gname, "split_last_dim": False, "out": out})
        return fn, fn, out, buf
    if op == "all_reduce":
        def timed():
            return symm_call(op_name, {"input": buf, "reduce_op": "sum", "group_name": gname})
    else:
        def timed():
            res = symm_call(op_name, {"input": buf, "reduce_op": "sum", "group_name": gname})
            if wait is not None and hasattr(wait, "wait_tensor"):
                res = wait.wait_tensor(res)
            return res

    def checked():
        out.copy_(timed().reshape(-1))
    return timed, checked, out, buf


def auto_check(results):
    """Set ``auto_over_best`` / ``best`` on each ``auto`` row (auto's time over the fastest of our methods and NCCL
    -- where the run had an NCCL column -- at the same op, dtype and size); returns the worst as ``{"ratio", "op",
    "dtype", "bytes"}`` (None if no auto)."""
    worst = None
    groups = {}
    for r in results:
        if "us" in r:
            groups.setdefault((r["op"], r.get("dtype"), r["bytes"]), []).append(r)
    for (op, dt, nbytes), rows in groups.items():
        cands = {} if rows[0].get("nccl_us") is None else {"nccl": rows[0]["nccl_us"]}
        for r in rows:
            if r["method"] != "auto" and not r.get("baseline") and r.get("correct", True):
                cands[r["method"]] = r["us"]
        if not cands:
            continue
        best = min(cands, key=cands.get)
        for r in rows:
            if r["method"] == "auto" and cands[best] > 0:
                r["auto_over_best"] = r["us"] / cands[best]
                r["best"] = best
                if worst is None or r["auto_over_best"] > worst["ratio"]:
                    worst = {"ratio": r["auto_over_best"], "op": op, "dtype": dt, "bytes": nbytes, "best": best,
                             "auto_picked": r.get("resolved")}
    return worst


def write_table(doc, source, out_path):
    """Write the measured dispatch table derived from ``doc`` (a bench_collectives results document) to
    ``out_path``, keeping the entries of the table already there that ``doc`` did not measure. Returns the path.
    Refuses (SystemExit) a document whose ranks shared a GPU (``shared_gpu``: no NVLink in those timings)."""
    from triton_dist.ops import collectives as C

    if doc.get("shared_gpu"):
        raise SystemExit(f"bench_collectives --write-table / --table-from: {NO_TABLE}")

    from triton_dist.ops import collectives_table as CT

    found = CT.COLLECTIVES_TABLE.read(out_path)
    old = None if found is None else found[0]
    table = C.build_table(doc, source, old=old)
    CT.COLLECTIVES_TABLE.write(table, out_path)  # one line per rule / measured point (innermost objects)
    return os.path.normpath(out_path)


def _source_name(path):
    """A results path as recorded in the table: relative to the repository root when inside it."""
    root = os.path.abspath(os.path.join(HERE, ".."))
    ap = os.path.abspath(path)
    return os.path.relpath(ap, root) if ap.startswith(root + os.sep) else ap


def print_check(worst):
    if worst is None:
        print("auto check: no auto rows")
        return
    print(f"auto check: worst auto / best(ours, NCCL) = {worst['ratio']:.3f} at {worst['op']} {worst['dtype']} "
          f"{worst['bytes']} B (best {worst['best']}, auto picked {worst['auto_picked']})", flush=True)


def main(argv=None):
    from triton_dist.ops.collectives import TABLE_PATH

    argv = sys.argv[1:] if argv is None else list(argv)
    probe = harness.split_probe(argv, PROBES)
    if probe is not None:  # a one-off measurement: its own options, its own results JSON
        from collectives_probes import PROBES as entry

        return entry[probe[0]](probe[1])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probe", choices=PROBES, default=None,
                    help="run a one-off probe instead (benchmarks/collectives_probes.py); the first option, the ones "
                         "after its name are the probe's (--probe NAME --help)")
    ap.add_argument("--quick", action="store_true", help="fewer sizes and iterations (~3 minutes on 2x H200)")
    ap.add_argument("--ops", default="all_reduce,all_gather,reduce_scatter")
    ap.add_argument("--sizes", default=None, help="comma list of byte sizes (overrides the size list)")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--dtypes", "--dtype", dest="dtypes", default="bfloat16",
                    help="comma list: bfloat16, float16, float32 (one process runs them all)")
    ap.add_argument("--eager-max-bytes", type=int, default=EAGER_MAX_BYTES,
                    help="time every implementation eagerly up to this size (default 1 MiB; 0: no eager column)")
    ap.add_argument("--no-symm", dest="symm", action="store_false", help="skip torch's symmetric-memory baselines")
    ap.add_argument("--write-table", action="store_true", help="write the measured dispatch table (rank 0)")
    ap.add_argument("--table-out", default=TABLE_PATH, help=f"table path (default {os.path.relpath(TABLE_PATH)})")
    ap.add_argument("--table-from", default=None, metavar="JSON",
                    help="no GPU: write the table from an earlier run's results JSON and exit")
    ap.add_argument("--tag", default="")
    ap.add_argument("--methods", default=None, help="comma list: only these methods (e.g. push,push_pipe,auto)")
    # tuning knobs of the contexts (defaults: the library's), for GPU sweeps
    ap.add_argument("--block-bytes", type=int, default=None, help="bytes per block (library default 16384)")
    ap.add_argument("--num-warps", type=int, default=None, help="warps per program (library default 8)")
    ap.add_argument("--pipe-pushers", type=int, default=None,
                    help="push_pipe / two_shot_pipe: programs that push (default half the grid; the rest copy out / "
                    "reduce)")
    ap.add_argument("--pipe-segments", type=int, default=None, help="push_pipe: most segments per call (16)")
    ap.add_argument("--pipe-seg-blocks", type=int, default=None,
                    help="push_pipe: least blocks per segment and pusher (4)")
    ap.add_argument("--ll-block-words", type=int, default=None, help="ll: 32-bit words per block (256)")
    ap.add_argument("--ll-num-warps", type=int, default=None, help="ll: warps per program (4)")
    args = ap.parse_args(argv)
    if args.probe:
        ap.error("--probe must be the first option (the options after its name are the probe's)")
    if args.table_from:
        with open(args.table_from) as f:
            doc = json.load(f)
        if doc.get("shared_gpu"):
            raise SystemExit(f"bench_collectives --table-from {args.table_from}: {NO_TABLE}")
        print_check(auto_check(doc.get("results", [])))
        print("dispatch table:", write_table(doc, _source_name(args.table_from), args.table_out))
        return
    dtypes = [d for d in args.dtypes.split(",") if d]
    bad = [d for d in dtypes if d not in ("bfloat16", "float16", "float32")]
    if bad:
        ap.error(f"--dtypes: unknown {bad}; accepted: bfloat16, float16, float32")
    opnames = [o for o in args.ops.split(",") if o]
    bad = [o for o in opnames if o not in METHODS]
    if bad:
        ap.error(f"--ops: unknown {bad}; accepted: {', '.join(METHODS)}")

    import triton_dist.utils as tdu
    from triton_dist import ops

    tdu.initialize_distributed()
    rank, world = dist.get_rank(), dist.get_world_size()
    topo = topology()
    shared = GPU and not TC.group_has_nccl()  # ranks share a GPU: no NCCL in the group
    log = (lambda *a: print(*a, flush=True)) if rank == 0 else (lambda *a: None)
    log(f"bench_collectives: {topology_line(topo)}; baseline "
        f"{'gloo on host copies (eager only), no NCCL' if shared else 'NCCL' if GPU else 'gloo (simulator)'}")
    if shared and args.write_table:
        tdu.finalize_distributed()
        raise SystemExit(f"bench_collectives --write-table: {NO_TABLE}")
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else (QUICK_SIZES if args.quick else FULL_SIZES)
    reps = args.reps or (10 if args.quick else 30)
    maxb = max(sizes)
    stream = torch.cuda.Stream() if GPU else None
    results = []
    t_start = time.time()
    if shared:
        gname, symm_ops, symm_info = None, {}, {"unavailable": NO_SYMM}
    else:
        gname, symm_ops, symm_info = symm_setup() if args.symm else (None, {}, {"unavailable": "skipped (--no-symm)"})
    if "unavailable" in symm_info:
        log(f"torch symm-mem baselines: {symm_info['unavailable']}")

    for dtname in dtypes:
        dtype = getattr(torch, dtname)
        esize = torch.empty((), dtype=dtype).element_size()
        for op in opnames:
            results += bench_op(op, dtname, dtype, esize, sizes, maxb, reps, stream, world, args, ops, gname,
                                symm_ops, log, shared)
    worst = auto_check(results)

    if rank == 0:
        outdir = harness.results_dir()
        stamp = harness.utc_stamp()
        doc = harness.result_header("bench_collectives", topo, stamp, mode="quick" if args.quick else "full")
        doc.update({
            "baseline": ("gloo_host: torch_collectives on host copies over gloo, eager only (gloo_host_us); no NCCL "
                         "column (nccl_us null): ranks share a GPU" if shared else "nccl" if GPU else "gloo"),
            "dtypes": dtypes,
            "env": {k: os.environ.get(k) for k in ("NVSHMEM_DISABLE_NVLS", "NCCL_NVLS_ENABLE", "NVSHMEM_SYMMETRIC_SIZE",
                                                   "TORCH_SYMM_MEM_DISABLE_MULTICAST")},
            "timing": ("CUDA-graph replay of k calls (k <= 200), CUDA events, each sample after a barrier and a "
                       "device-side rendezvous, samples interleaved over implementations, median of reps samples / k "
                       "(us), max over ranks; eager k calls "
                       f"up to {args.eager_max_bytes} B (eager_us)" if GPU else
                       "simulator smoke run: eager wall clock (not a performance figure)")
            + ("; ranks share a GPU: no NCCL column, the gloo host-path baseline timed eagerly only (gloo_host_us: "
               "k <= 20 calls per sample, <= 10 samples), the device-side rendezvous an NVSHMEM barrier on the "
               "stream" if shared else ""),
            "eager_max_bytes": args.eager_max_bytes,
            "torch_symm": symm_info,
            "wall_s": time.time() - t_start,
            "context_knobs": context_knobs(args),
            "graph_capture_failures": GRAPH_FAILURES,
            "auto_check": worst,
            "results": results,
        })
        path = harness.write_json(
            os.path.join(outdir, f"collectives_{stamp}{('_' + args.tag) if args.tag else ''}.json"), doc)
        print(f"wrote {path}", flush=True)
        print_check(worst)
        if args.write_table:
            print("dispatch table:", write_table(doc, _source_name(path), args.table_out), flush=True)
    dist.barrier()
    tdu.finalize_distributed()


def context_knobs(args) -> dict:
    """The context tuning knobs given on the command line (``create_*_ctx`` keyword arguments)."""
    return {k: v for k, v in (("block_bytes", args.block_bytes), ("num_warps", args.num_warps),
                              ("pipe_pushers", args.pipe_pushers), ("pipe_segments", args.pipe_segments),
                              ("pipe_seg_blocks", args.pipe_seg_blocks), ("ll_block_words", args.ll_block_words),
                              ("ll_num_warps", args.ll_num_warps)) if v is not None}


def bench_op(op, dtname, dtype, esize, sizes, maxb, reps, stream, world, args, ops, gname, symm_ops, log,
             shared=False):
    """Every size of one op and dtype: rows for each of our methods (and auto) and each torch symm-mem baseline.
    ``shared`` (ranks share a GPU, no NCCL): the reference is the collective through ``torch_collectives`` (gloo on
    host copies), timed eagerly as ``gloo_host_us``; ``nccl_us`` is None."""
    results = []
    knobs = context_knobs(args)
    only = args.methods.split(",") if args.methods else None
    if op == "all_gather":
        ctx = ops.create_allgather_ctx(maxb // esize // world, dtype, **knobs)
    elif op == "reduce_scatter":
        ctx = ops.create_reduce_scatter_ctx(maxb // esize, dtype, **knobs)
    else:
        ctx = ops.create_allreduce_ctx(maxb // esize, dtype, one_shot_max_numel=min(maxb, 256 * MB) // esize,
                                       methods=("one_shot", "two_shot", "two_shot_pipe", "ll"), **knobs)
    for nbytes in sizes:
        n = nbytes // esize
        eager = nbytes <= args.eager_max_bytes
        if op == "all_gather":
            x = torch.randn(n // world, device=DEV).to(dtype)
            out = torch.empty(n, dtype=dtype, device=DEV)
            ref = torch.empty(n, dtype=dtype, device=DEV)
            nccl = ((lambda: TC.all_gather_into_tensor(ref, x)) if shared else  # noqa: E731
                    (lambda: TC.dist_all_gather_single(ref, x)))
            ours = lambda m: ops.all_gather(x, ctx, out=out, method=m)  # noqa: E731
        elif op == "reduce_scatter":
            x = torch.randn(n, device=DEV).to(dtype)
            out = torch.empty(n // world, dtype=dtype, device=DEV)
            ref = torch.empty(n // world, dtype=dtype, device=DEV)
            nccl = ((lambda: TC.reduce_scatter_tensor(ref, x)) if shared else  # noqa: E731
                    (lambda: TC.dist_reduce_scatter_single(ref, x)))
            ours = lambda m: ops.reduce_scatter(x, ctx, out=out, method=m)  # noqa: E731
        else:
            x = torch.randn(n, device=DEV).to(dtype)
            out = torch.empty(n, dtype=dtype, device=DEV)
            ref = torch.empty(n, dtype=dtype, device=DEV)

            def nccl():
                ref.copy_(x)
                if shared:
                    TC.all_reduce(ref)
                else:
                    dist.all_reduce(ref)

            ours = lambda m: ops.all_reduce(x, ctx, out=out, method=m)  # noqa: E731
        nccl()
        sync()
        nccl_ref = ref.clone()
        tol = 0.0 if op == "all_gather" else 0.05 * max(1.0, nccl_ref.float().abs().max().item())
        impls = []  # (name, fn, resolved, baseline, ok, err, keep-alive) of every implementation that ran correctly

        def check(name, fn, result, resolved, baseline=False, reset=None, keep=None, timed=None):
            """Run ``fn`` once and compare ``result`` with NCCL's; then ``timed`` (default ``fn``) is timed."""
            try:
                if reset is None:
                    result.zero_()
                else:
                    reset()  # in-place baseline: the input is the result
                fn()
                sync()
                err = (result.float() - nccl_ref.float()).abs().max().item() if result.numel() else 0.0
            except Exception as exc:  # noqa: BLE001
                log(f"ERROR {op} {dtname} {name} {nbytes}: {type(exc).__name__}: {exc}")
                errors.append(dict(method=name, baseline=baseline, error=f"{type(exc).__name__}: {exc}"[:300]))
                return
            impls.append((name, timed or fn, resolved, baseline, err <= tol, err, keep))

        errors = []
        for m in METHODS[op]:
            if op == "all_reduce" and m == "one_shot" and n > ctx.one_shot_cap:
                continue
            if m == "ll" and (n if op == "all_reduce" else n // world) > ctx.ll_cap:  # beyond its capacity
                continue
            if (m not in ctx.methods and m != "auto") or (only and m not in only):
                continue
            check(m, lambda m=m: ours(m), out, ctx.select(nbytes) if m == "auto" else m)
        for label, op_name in symm_ops.get(op, []):
            try:
                timed, fn, result, buf = make_symm(op, op_name, gname, x, out, world)
            except Exception as exc:  # noqa: BLE001
                errors.append(dict(method=f"torch_symm/{label}", baseline=True,
                                   error=f"{type(exc).__name__}: {exc}"[:300]))
                continue
            check(f"torch_symm/{label}", fn, result, op_name, baseline=True,
                  reset=(lambda b=buf, x=x: b.copy_(x.reshape(-1))) if result is buf else None, keep=(result, buf),
                  timed=timed)
            timed = fn = result = buf = None
        # graph timing of NCCL and every implementation, samples interleaved round-robin (drift and clock changes
        # hit every implementation alike); eager timing after, one implementation at a time
        if shared:  # the host path cannot be captured: our implementations graphed, the baseline eager alone
            times = time_graphs([(i[0], i[1]) for i in impls], nbytes, reps, stream) if impls else {}
            t_nccl = t_nccl_eager = None
            t_host = time_host(nccl, nbytes, reps)
            row_base = dict(op=op, bytes=nbytes, dtype=dtname, world=world, nccl_us=None, nccl_busbw_gbs=None,
                            nccl_eager_us=None, nccl_unavailable=NO_NCCL, gloo_host_us=t_host,
                            gloo_host_busbw_gbs=busbw(op, nbytes, t_host, world))
            base_txt = f"gloo host (eager) {t_host:9.2f} us"
        else:
            times = time_graphs([("nccl", nccl)] + [(i[0], i[1]) for i in impls], nbytes, reps, stream)
            t_nccl = times["nccl"]
            t_nccl_eager = eager_us(nccl, nbytes, reps) if eager else None
            row_base = dict(op=op, bytes=nbytes, dtype=dtname, world=world, nccl_us=t_nccl,
                            nccl_busbw_gbs=busbw(op, nbytes, t_nccl, world), nccl_eager_us=t_nccl_eager)
            base_txt = f"nccl {t_nccl:9.2f} us ({row_base['nccl_busbw_gbs']:7.1f} GB/s)"
        for e in errors:
            results.append(dict(row_base, **e))
        for name, fn, resolved, baseline, ok, err, _ in impls:
            t = times[name]
            t_eager = eager_us(fn, nbytes, reps) if eager else None
            speedup = (t_nccl / t if t > 0 else 0.0) if t_nccl is not None else None
            row = dict(row_base, method=name, resolved=resolved, us=t, busbw_gbs=busbw(op, nbytes, t, world),
                       speedup=speedup, correct=bool(ok), max_err=err, eager_us=t_eager)
            if baseline:
                row["baseline"] = True
            results.append(row)
            eag = ""
            if t_eager is not None:
                eag = f"  eager {t_eager:8.2f}" + (f" / nccl {t_nccl_eager:8.2f}" if t_nccl_eager is not None else "")
                eag += " us"
            ratio = f"  x{speedup:.2f}" if speedup is not None else ""
            log(f"{op:15s} {dtname:8s} {name:28s} {nbytes:>11d} B  {t:9.2f} us ({row['busbw_gbs']:7.1f} GB/s)  "
                f"{base_txt}{ratio}  {'ok' if ok else 'WRONG err=%g' % err}{eag}")
        impls = None
        # Release this size's buffers before the next one is allocated. Not `del`: ruff (F821) then reports
        # every use of these names inside the closures above as undefined.
        x = out = ref = nccl_ref = None
    dist.barrier()
    ctx.close()
    if GPU:
        torch.cuda.empty_cache()
    return results


if __name__ == "__main__":
    main()
