"""Benchmark the Qwen3 decode step as ONE mega kernel against the same model in plain torch, in the same process.

    scripts/launch.sh --nproc_per_node {1,2} benchmarks/bench_mega.py [--preset qwen3-8b|qwen3-32b|toy]
        [--layers N] [--context 512] [--batch B] [--contexts L1,L2,...] [--steps 64] [--reps 20] [--num-workers N] [--num-warps 8] [--fused-mlp]
        [--prefetch] [--gemv-early-prefetch BYTES] [--variant NAME:KEY=VALUE[,KEY=VALUE]]... [--ar-method one_shot|ll]
        [--no-compile] [--profile DIR] [--out JSON]
    python benchmarks/bench_mega.py --preset toy --dry-run [--batch 4 --contexts 9,40,3,20]  # no GPU: the
                                                                 # simulator, world 1, no timing
    python benchmarks/bench_mega.py --probe linear-chain [...]   # a one-off probe (benchmarks/mega_probes.py)

Tensor parallelism = the world size (1 or 2), random weights at the preset's real shapes
(``triton_dist.mega_triton_kernel.models.qwen3.random_weights``). Batch ``--batch`` B (default 1): B requests decoded
in one step, request ``b`` at context ``--contexts``'s ``L_b`` (default: ``--context`` for all); its KV cache holds
``L_b - 1`` random positions and the step decodes its position ``L_b - 1``; every timed replay recomputes that same
step.

Measured (CUDA-graph replays of ``k`` steps, CUDA events, each sample after a barrier and a device-side rendezvous,
samples interleaved over the implementations, median / k, max over ranks: ``benchmarks/harness.py``):

* ``mega``: ``Qwen3MegaModel.run()`` (one persistent kernel per step);
* ``torch_nccl``: ``Qwen3TorchModel.run()`` with ``torch.distributed.all_reduce`` (NCCL) at world > 1;
* ``torch_ours``: the same torch model with ``triton_dist.ops.all_reduce`` (``--ar-method``, default one_shot);
* ``torch_compile``: the same torch model's step under ``torch.compile(run, mode=--compile-mode)`` (default
  ``max-autotune-no-cudagraphs``: the graph is ours, captured like the others), with the torch + NCCL all-reduce
  (where ranks share a GPU: ``--ar-method``'s, like ``torch_ours``); compiled in the capture's warm-up calls.
  ``--no-compile`` leaves it out; a failure (compile or capture, on any rank) is recorded in the JSON's
  ``skipped["torch_compile"]`` and the run goes on without it; its logits at the timed step against the eager
  model's: ``correctness.torch_compile_vs_torch_min_cosine``. No eager (uncaptured) column: every figure is a
  graph replay;
* ``--variant NAME:KEY=VALUE,...`` (repeatable): another mega model whose builder (or model) options differ from
  ``mega``'s by the given ones (:data:`VARIANT_KEYS`), timed in the same interleaved samples as ``NAME``, so that
  a change is A/B-measured in one process: ``NAME_us``, ``NAME_speedup_over_mega`` (> 1: the variant is faster),
  its roofline fractions; checked at the timed step against the torch model (``correctness.variants[NAME]``:
  cosine, top-1, and ``same_bits_as_mega``, expected true for hints such as the prefetch budgets); with
  ``--profile``, a trace of each variant too;
* ``copy``: a device-to-device copy of >= 1 GiB, for the HBM bandwidth ``2 * bytes / time`` (read + write), two
  ways: ``copy_`` (a D2D memcpy) and an elementwise kernel (``torch.neg(src, out=dst)``); the faster is the copy
  bandwidth (the memcpy moved 2.75 TB/s on an H200 where a read-only reduction streamed 4.3 TB/s, which made the
  roofline fraction exceed 1). Also a read-only probe (``sum`` of the same bytes): ``read_bandwidth_gbs``.

Reported: step latencies ``<name>_us``, ratios ``<name>_over_mega`` (torch_nccl, torch_ours, torch_compile: > 1 =
mega faster), the bytes a step must move per GPU (``models.qwen3.step_bytes``; the JSON's ``bytes_formula``: the
linear weights read once + the KV cache read (each request's context) + the new k/v written + norm weights + input
rows + fp32 logits written) and the roofline fraction ``bytes / step time / copy bandwidth``
(``<name>_roofline_fraction``; ``<name>_roofline_read_fraction``: against the read-only bandwidth, the tighter bound
for a step that reads far more than it writes). Before timing,
a correctness pass (teacher-forced, ``--steps`` decode steps, mega vs torch_nccl logits; at batch 1 from an empty
cache, at batch > 1 request ``b``'s cache first filled with ``max(0, L_b - steps)`` random positions, so the requests
sit at mixed lengths, and every request checked on its own, ``per_request`` in the JSON): the issue's targets are
cosine >= 0.999 every step (and request) and top-1 agreement >= 98%; then the timed step itself (each request at its
``L_b``), per request (``timed_step``: cosine >= 0.999 and the same top-1); the JSON records them and ``pass``.
``--profile DIR``: a profiled mega step's per-SM trace (Perfetto JSON) and Gantt PNG under DIR, its SM activity, and
where the step's time goes op by op (``ModelBuilder.op_timeline``) and per op kind (``timeline_by_kind``).
Ranks that share a GPU (TP > 1 on fewer GPUs, CUDA MPS; the JSON's ``shared_gpu``: true, its ``topology`` says how
many; no NVLink in these figures): the process group has no NCCL, so ``torch_nccl`` is not timed (``skipped`` says
why) and the torch baseline is ``torch_ours`` alone (``--ar-method``); the correctness reference is the same torch
model with torch_collectives' all-reduce (gloo on host copies, exact, eager only).
Writes JSON to ``--out`` or ``$TRITON_DIST_RESULTS_DIR`` (default benchmarks/results/) ``mega_<stamp>.json``.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

PRESETS = ("qwen3-8b", "qwen3-32b", "toy")
MIN_COSINE, MIN_TOP1 = 0.999, 0.98
#: torch.compile mode of the torch_compile baseline: inductor's best kernels, no CUDA graphs of its own (the bench
#: captures every implementation in its own graph the same way)
COMPILE_MODE = "max-autotune-no-cudagraphs"
#: where ranks share a GPU: why the torch + NCCL baseline is not timed
NO_NCCL = ("skipped: ranks share a GPU (gloo-only process group, no NCCL); the torch baseline is torch_ours (our "
           "all-reduce), and the torch model with torch_collectives' all-reduce (gloo on host copies, eager) is only "
           "the correctness reference")


#: Options a ``--variant`` may change: builder keyword arguments, and ``prefetch`` (the model's whole-layer prefetch)
VARIANT_KEYS = {"gemv_prefetch_bytes": int, "gemv_early_prefetch_bytes": int, "policy": str, "enable_fusion": bool,
                "enable_dep_opt": bool, "enable_runtime_scheduler": bool, "num_warps": int, "prefetch": bool,
                "split_loads_ahead": bool, "gemv_stages": int, "kv_split_positions": int}


def parse_variant(spec: str):
    """``NAME:KEY=VALUE[,KEY=VALUE]`` -> ``(NAME, {KEY: value})`` (values typed by :data:`VARIANT_KEYS`; booleans
    ``true`` / ``false``); ValueError with the reason otherwise."""
    name, sep, body = spec.partition(":")
    if not sep or not name.isidentifier() or not body:
        raise ValueError(f"--variant {spec!r}: expected NAME:KEY=VALUE[,KEY=VALUE] with NAME an identifier")
    if name in ("mega", "torch_nccl", "torch_ours", "torch_compile", "copy"):
        raise ValueError(f"--variant {spec!r}: {name!r} is taken by a built-in column")
    kw = {}
    for item in body.split(","):
        key, eq, value = item.partition("=")
        if not eq or key not in VARIANT_KEYS:
            raise ValueError(f"--variant {spec!r}: {item!r} is not KEY=VALUE with KEY one of "
                             f"{', '.join(sorted(VARIANT_KEYS))}")
        typ = VARIANT_KEYS[key]
        if typ is bool:
            if value.lower() not in ("true", "false"):
                raise ValueError(f"--variant {spec!r}: {key} takes true or false, got {value!r}")
            kw[key] = value.lower() == "true"
        elif typ is int:
            try:
                kw[key] = int(value, 0)
            except ValueError:
                raise ValueError(f"--variant {spec!r}: {key} takes an integer, got {value!r}") from None
        else:
            kw[key] = value
    return name, kw


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probe", choices=("linear-chain", ), default=None,
                    help="run a one-off probe instead (benchmarks/mega_probes.py); the first option, the ones after "
                         "its name are the probe's (--probe NAME --help)")
    ap.add_argument("--preset", default="qwen3-8b", choices=PRESETS, help="model shapes (default qwen3-8b)")
    ap.add_argument("--layers", type=int, default=None, help="keep only the first N layers (quick runs)")
    ap.add_argument("--context", type=int, default=512, help="tokens in the cache at the timed step (default 512)")
    ap.add_argument("--batch", type=int, default=None,
                    help="requests decoded per step (default: as many as --contexts names, else 1)")
    ap.add_argument("--contexts", default=None, metavar="L1,L2,...",
                    help="each request's context at the timed step (mixed lengths; default --context for all)")
    ap.add_argument("--steps", type=int, default=64, help="teacher-forced decode steps of the correctness pass")
    ap.add_argument("--reps", type=int, default=20, help="timed samples per implementation")
    ap.add_argument("--graph-steps", type=int, default=10, help="steps per CUDA graph (one timed sample)")
    ap.add_argument("--num-workers", type=int, default=None, help="mega kernel programs (default: one per SM)")
    ap.add_argument("--num-warps", type=int, default=8, help="warps per mega kernel program (8: a 4-warp GEMV streams half as fast on an H200)")
    ap.add_argument("--fused-mlp", action="store_true", help="fused fc1 + silu * up (enable_mlp_fc1_silu_fusion)")
    ap.add_argument("--prefetch", action="store_true", help="prefetch each next layer's weights (make_prefetch)")
    ap.add_argument("--gemv-prefetch", type=int, default=None, metavar="BYTES",
                    help="weight bytes a GEMV tile prefetches into L2 before its wait (ModelBuilder "
                         "gemv_prefetch_bytes; default: the builder's)")
    ap.add_argument("--gemv-early-prefetch", type=int, default=None, metavar="BYTES",
                    help="bytes of a GEMV's weight the workers prefetch into L2 as they enter the attention / "
                         "all-reduce before it (ModelBuilder gemv_early_prefetch_bytes; default: the builder's)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME:KEY=VALUE[,KEY=VALUE]",
                    help="another mega model with these options changed, timed beside mega in the same samples "
                         f"(repeatable; keys: {', '.join(sorted(VARIANT_KEYS))})")
    ap.add_argument("--runtime-scheduler", action="store_true", help="dynamic task queue (enable_runtime_scheduler)")
    ap.add_argument("--ar-method", default="one_shot", choices=("one_shot", "ll"),
                    help="triton_dist all_reduce method of the torch_ours baseline")
    ap.add_argument("--no-compile", action="store_true", help="do not time the torch.compile'd torch model")
    ap.add_argument("--compile-mode", default=COMPILE_MODE,
                    help=f"torch.compile mode of the torch_compile baseline (default {COMPILE_MODE})")
    ap.add_argument("--copy-gib", type=float, default=1.0, help="GiB copied by the bandwidth probe (>= 1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", default=None, metavar="DIR", help="dump a profiled mega step's trace + Gantt here")
    ap.add_argument("--out", default=None, metavar="JSON", help="output path (default: results dir, timestamped)")
    ap.add_argument("--dry-run", action="store_true",
                    help="no GPU: build and check the model on the simulator (use --preset toy), no timing")
    args = ap.parse_args(argv)
    if args.probe:
        ap.error("--probe must be the first option (the options after its name are the probe's)")
    if args.layers is not None and args.layers < 1:
        ap.error("--layers must be >= 1")
    if args.contexts is not None:
        try:
            args.contexts = [int(c) for c in args.contexts.split(",")]
        except ValueError:
            ap.error(f"--contexts must be comma-separated ints, got {args.contexts!r}")
        if args.batch is not None and args.batch != len(args.contexts):
            ap.error(f"--contexts names {len(args.contexts)} lengths, --batch is {args.batch}: one length per request")
    if args.batch is not None and args.batch < 1:
        ap.error("--batch must be >= 1")
    if args.contexts is None:
        args.contexts = [args.context] * (args.batch or 1)
    args.batch = len(args.contexts)
    if min(args.contexts + [args.context]) < 2:
        ap.error("--context and --contexts must be >= 2 (a cached prefix and the decoded token)")
    if args.batch > 1:  # the timed (longest) context, in the JSON and the tables
        args.context = max(args.contexts)
    if args.steps < 1 or args.reps < 1 or args.graph_steps < 1:
        ap.error("--steps, --reps and --graph-steps must be >= 1")
    if args.copy_gib < 1.0 and not args.dry_run:
        ap.error("--copy-gib must be >= 1 (the bandwidth probe must not fit in L2)")
    if args.dry_run and args.preset != "toy":
        ap.error("--dry-run runs on the simulator: use --preset toy")
    variants = {}
    for spec in args.variant:
        try:
            name, kw = parse_variant(spec)
        except ValueError as e:
            ap.error(str(e))
        if name in variants:
            ap.error(f"--variant {name!r} is given twice")
        variants[name] = kw
    args.variants = variants
    return args


def make_config(args):
    from triton_dist.mega_triton_kernel.models import QWEN3_8B, QWEN3_32B, Qwen3Config

    cfg = {"qwen3-8b": QWEN3_8B, "qwen3-32b": QWEN3_32B, "toy": Qwen3Config.toy()}[args.preset]
    # the correctness pass decodes --steps tokens (at batch 1 from an empty cache; at batch > 1 request b reaches
    # max(L_b, steps)); the timed step is at the longest context
    ctx = max(args.context, args.steps + 1)
    kw = dict(max_context=-(-ctx // cfg.page_size) * cfg.page_size if args.dry_run else ctx)
    if args.layers is not None:
        kw["num_layers"] = args.layers
    return cfg.replace(**kw)


def main(argv=None):
    import harness
    from mega_probes import PROBES

    argv = sys.argv[1:] if argv is None else list(argv)
    probe = harness.split_probe(argv, PROBES)
    if probe is not None:  # a one-off measurement: its own options, its own results JSON
        return PROBES[probe[0]](probe[1])
    args = parse_args(argv)
    if args.dry_run:
        os.environ.setdefault("TRITON_DIST_BACKEND", "sim")
    else:
        os.environ.setdefault("NVSHMEM_SYMMETRIC_SIZE", "2G")
        os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    import torch
    import torch.distributed as dist

    import triton_dist.utils as tdu
    from triton_dist.mega_triton_kernel.models import (STEP_BYTES_FORMULA, Qwen3MegaModel, Qwen3TorchModel,
                                                       logits_agreement, random_kv, random_weights, step_bytes,
                                                       teacher_forced_check)
    import harness
    from provenance import topology, topology_line
    from triton_dist.runtime import torch_collectives as TC

    gpu = not args.dry_run
    if gpu and not torch.cuda.is_available():
        sys.exit("bench_mega.py: no CUDA GPU visible (use --dry-run --preset toy for the simulator path)")
    tdu.initialize_distributed(seed=args.seed)
    rank, world = dist.get_rank(), dist.get_world_size()
    log = (lambda *a: print(*a, flush=True)) if rank == 0 else (lambda *a: None)
    topo = topology()
    shared = gpu and world > 1 and not TC.group_has_nccl()  # ranks share a GPU: no NCCL in the group
    log(f"bench_mega: TP={world}, {topology_line(topo)}"
        + (f"; torch baseline: torch + our {args.ar_method} all-reduce only (no NCCL)" if shared else ""))
    cfg = make_config(args)
    cfg.check_world(world)
    dev = torch.device("cuda", torch.cuda.current_device()) if gpu else torch.device("cpu")
    t0 = time.time()
    w = random_weights(cfg, rank, world, seed=args.seed, device=dev)
    bkw = dict(num_warps=args.num_warps, enable_mlp_fc1_silu_fusion=args.fused_mlp,
               enable_runtime_scheduler=args.runtime_scheduler, gemv_prefetch_bytes=args.gemv_prefetch,
               gemv_early_prefetch_bytes=args.gemv_early_prefetch, prefetch=args.prefetch)
    if args.num_workers is not None:
        bkw["num_workers"] = args.num_workers
    B = args.batch
    mega = Qwen3MegaModel(cfg, w, rank, world, batch=B, **bkw)
    log(f"built {args.preset} ({cfg.num_layers} layers) TP={world} batch {B}: {len(mega.builder.tasks)} tasks, "
        f"{mega.builder.num_workers} workers, {time.time() - t0:.1f} s")
    variants = {name: Qwen3MegaModel(cfg, w, rank, world, batch=B, **dict(bkw, **kw))
                for name, kw in args.variants.items()}

    def nccl_ar(t):
        if shared:  # the correctness reference only: host copies over gloo, never captured
            TC.all_reduce(t)
            return t
        if gpu:
            dist.all_reduce(t)
            return t
        f = t.float()  # gloo on the simulator: sum in fp32
        dist.all_reduce(f)
        return f.to(t.dtype)

    # the baseline attends over the timed context, not the whole max_context cache (a fair torch model)
    window = min(cfg.max_context, max(args.context, args.steps))
    ref = Qwen3TorchModel(cfg, w, rank, world, all_reduce=nccl_ar, attn_window=window, batch=B)
    ours = None
    if world > 1 and gpu:
        from triton_dist import ops

        ar_ctx = ops.create_allreduce_ctx(B * cfg.hidden_size, w.embed.dtype, methods=(args.ar_method, ))
        ar_out = torch.empty(B, cfg.hidden_size, dtype=w.embed.dtype, device=dev)
        ours = Qwen3TorchModel(cfg, w, rank, world, attn_window=window, batch=B,
                               all_reduce=lambda t: ops.all_reduce(t, ar_ctx, out=ar_out, method=args.ar_method))

    # correctness: teacher-forced from an empty cache
    g = torch.Generator().manual_seed(args.seed + 1)
    toks = torch.randint(0, cfg.vocab_size, (args.steps, ) if B == 1 else (args.steps, B), generator=g).tolist()
    t0 = time.time()
    if B == 1:
        chk = teacher_forced_check(mega, ref, toks)
    else:  # mixed lengths: request b starts from max(0, L_b - steps) random positions
        for b, n in enumerate(args.contexts):
            if n > args.steps:
                kvs = random_kv(cfg, n - args.steps, rank, world, seed=args.seed + 3 + b, device=dev)
                mega.load_kv(kvs, request=b)
                ref.load_kv(kvs, request=b)
        chk = teacher_forced_check(mega, ref, toks, reset=False)
    chk["timed_step"], var_chk = timed_step_check(args, cfg, rank, world, dev, mega, ref, random_kv, variants)
    chk["pass"] = bool(chk["min_cosine"] >= MIN_COSINE and chk["top1_rate"] >= MIN_TOP1
                       and min(chk["timed_step"]["cosine"]) >= MIN_COSINE and all(chk["timed_step"]["top1"]))
    if variants:
        chk["variants"] = var_chk
        chk["pass"] = chk["pass"] and all(min(v["cosine"]) >= MIN_COSINE and all(v["top1"])
                                          for v in chk["variants"].values())
        for name, v in chk["variants"].items():
            log(f"variant {name} {args.variants[name]}: timed step cosine {min(v['cosine']):.6f}, top-1 "
                f"{sum(v['top1'])}/{B}, same bits as mega: {v['same_bits_as_mega']}")
    chk["targets"] = dict(min_cosine=MIN_COSINE, top1_rate=MIN_TOP1)
    log(f"correctness ({args.steps} teacher-forced steps, {time.time() - t0:.1f} s): min cosine "
        f"{chk['min_cosine']:.6f}, top-1 {chk['top1_rate']:.3f}; the timed step per request: cosine "
        f"{min(chk['timed_step']['cosine']):.6f}, top-1 {sum(chk['timed_step']['top1'])}/{B} -> "
        f"{'PASS' if chk['pass'] else 'FAIL'}")
    if ours is not None:
        ours_chk = teacher_forced_check(ours, ref, toks[:8])
        chk["torch_ours_vs_nccl_min_cosine"] = ours_chk["min_cosine"]

    nbytes = step_bytes(cfg, world, args.contexts if B > 1 else args.context, w.embed.element_size())
    times, copy, profile = {}, {}, None
    skipped = {"torch_nccl": NO_NCCL} if shared else {}
    compiled = None
    if args.no_compile:
        skipped["torch_compile"] = "skipped: --no-compile"
    elif not gpu:
        skipped["torch_compile"] = "skipped: dry run (no timing)"
    else:  # torch.compile is lazy: it compiles in the capture's warm-up calls, where a failure is caught
        compiled = Qwen3TorchModel(cfg, w, rank, world, attn_window=window, batch=B,
                                   all_reduce=ours.all_reduce if shared and ours is not None else nccl_ar)
        compiled.run = torch.compile(compiled.run, mode=args.compile_mode)
    if gpu:
        times, copy = time_steps(args, cfg, world, rank, dev, mega, None if shared else ref, ours, random_kv, log,
                                 compiled=compiled, skipped=skipped, variants=variants)
        if "torch_compile" in times:  # its replays computed the timed step: the same logits as the eager model's
            chk["torch_compile_vs_torch_min_cosine"] = min(logits_agreement(compiled.logits, ref.logits)[0])
        if args.profile:
            profile = profile_step(args, cfg, w, rank, world, bkw, random_kv, dev)
            if variants:  # each variant's own trace beside mega's
                profile["variants"] = {name: profile_step(args, cfg, w, rank, world, dict(bkw, **kw), random_kv, dev,
                                                          prefix=f"MEGA_KERNEL_TRACE_{name}")
                                       for name, kw in args.variants.items()}
            for kind, k in sorted(profile["by_kind"].items(), key=lambda kv: -kv[1]["advance_us"]):
                tile = "-" if k["tile_us"] is None else f"{k['tile_us']:.2f}"
                gbs = "-" if k["gbs"] is None else f"{k['gbs']:.0f}"
                log(f"profile {kind}: {k['ops']} ops, {k['advance_us']:.1f} us of the step, {k['bytes'] / 1e6:.1f} MB "
                    f"({gbs} GB/s), tile us first {k['first_tile_us']:.2f} / others {tile}")
    else:
        log("dry run (simulator): no timing")

    res = dict(bytes_per_step=nbytes)
    if times:
        bw = copy["bandwidth_gbs"] * 1e9
        rbw = copy["read_bandwidth_gbs"] * 1e9
        for name, us in times.items():
            res[f"{name}_us"] = us
            res[f"{name}_roofline_fraction"] = nbytes["total"] / (us * 1e-6) / bw if us > 0 else 0.0
            res[f"{name}_roofline_read_fraction"] = nbytes["total"] / (us * 1e-6) / rbw if us > 0 else 0.0
        for name in ("torch_nccl", "torch_ours", "torch_compile"):
            if name in times and times.get("mega"):
                res[f"{name}_over_mega"] = times[name] / times["mega"]
        for name in variants:
            if times.get(name):
                res[f"{name}_speedup_over_mega"] = times["mega"] / times[name]
                log(f"variant {name}: {times[name]:.1f} us, {res[f'{name}_speedup_over_mega']:.4f}x mega's "
                    f"{times['mega']:.1f} us (roofline fraction {res[f'{name}_roofline_fraction']:.3f})")
        log(f"step: mega {times['mega']:.1f} us"
            + (f", torch+nccl {times['torch_nccl']:.1f} us" if "torch_nccl" in times else ", torch+nccl skipped")
            + (f", torch+ours({args.ar_method}) {times['torch_ours']:.1f} us" if "torch_ours" in times else "")
            + (f", torch.compile {times['torch_compile']:.1f} us ({res['torch_compile_over_mega']:.3f}x)"
               if "torch_compile" in times else ", torch.compile " + skipped.get("torch_compile", "-"))
            + f"; bytes/step {nbytes['total'] / 1e9:.3f} GB, copy bandwidth {copy['bandwidth_gbs']:.0f} GB/s, "
            f"roofline fraction mega {res['mega_roofline_fraction']:.3f} ({res['mega_roofline_read_fraction']:.3f} "
            f"of the read bandwidth {copy['read_bandwidth_gbs']:.0f} GB/s)"
            + "".join(f", {n} {res[f'{n}_roofline_fraction']:.3f}" for n in ("torch_nccl", "torch_ours",
                                                                              "torch_compile")
                      if f"{n}_roofline_fraction" in res))

    if rank == 0:
        stamp = harness.utc_stamp()
        doc = harness.result_header("bench_mega", topo, stamp)
        doc.update({
            "skipped": skipped, "bytes_formula": STEP_BYTES_FORMULA,
            "compile_mode": None if args.no_compile else args.compile_mode,
            "preset": args.preset, "config": dataclasses.asdict(cfg),
            "context": args.context, "batch": B, "contexts": args.contexts,
            "mega": dict(tasks=len(mega.builder.tasks), num_workers=mega.builder.num_workers,
                         num_warps=args.num_warps, fused_mlp=args.fused_mlp, prefetch=args.prefetch,
                         runtime_scheduler=args.runtime_scheduler, ops=len(mega.builder.ops),
                         gemv_prefetch_bytes=mega.builder.gemv_prefetch_bytes,
                         gemv_early_prefetch_bytes=mega.builder.gemv_early_prefetch_bytes),
            "variants": {name: dict(options=args.variants[name], tasks=len(v.builder.tasks))
                         for name, v in variants.items()},
            "ar_method": args.ar_method if ours is not None else None,
            "timing": ("CUDA-graph replay of graph_steps steps at a fixed position, CUDA events, each sample after a "
                       "barrier and a device-side rendezvous, samples interleaved over implementations, median / "
                       "graph_steps (us), max over ranks" if gpu else "dry run on the simulator: none"),
            "graph_steps": args.graph_steps, "reps": args.reps,
            "correctness": chk, "results": res, "copy": copy, "profile": profile,
            "env": {k: os.environ.get(k) for k in ("NVSHMEM_DISABLE_NVLS", "NCCL_NVLS_ENABLE", "NVSHMEM_SYMMETRIC_SIZE",
                                                   "TRITON_DIST_BACKEND")},
        })
        path = harness.write_json(args.out or os.path.join(harness.results_dir(), f"mega_{stamp}.json"), doc)
        print(f"wrote {path}", flush=True)
    dist.barrier()
    tdu.finalize_distributed()
    return 0 if chk["pass"] else 1


def load_contexts(args, cfg, rank, world, dev, models, random_kv):
    """Every model at the timed step: request ``b``'s cache holding ``L_b - 1`` random positions (the same values in
    every model), token 1 decoded at position ``L_b - 1``."""
    for b, n in enumerate(args.contexts):
        kvs = random_kv(cfg, n - 1, rank, world, seed=args.seed + 2 + b, device=dev)
        for m in models:
            m.load_kv(kvs, request=b)
    for m in models:
        m.prepare(1 if args.batch == 1 else [1] * args.batch)


def timed_step_check(args, cfg, rank, world, dev, mega, ref, random_kv, variants=None):
    """The timed step itself (:func:`load_contexts`: each request at its own context) in the mega model, the
    reference and every ``--variant`` model, each run once: ``(mega's, {name: the variant's})``, per request the
    logits' ``cosine`` and ``top1`` agreement with the reference (lists of B), for a variant also
    ``same_bits_as_mega`` (its logits equal mega's bit for bit)."""
    import torch

    from triton_dist.mega_triton_kernel.models import logits_agreement

    variants = variants or {}
    models = (mega, ref, *variants.values())
    load_contexts(args, cfg, rank, world, dev, models, random_kv)
    for m in models:
        m.run()
    cos, top1 = logits_agreement(mega.logits, ref.logits)
    checks = {}
    for name, v in variants.items():
        vcos, vtop1 = logits_agreement(v.logits, ref.logits)
        checks[name] = dict(cosine=vcos, top1=vtop1, same_bits_as_mega=bool(torch.equal(v.logits, mega.logits)))
    return dict(cosine=cos, top1=top1), checks


def time_steps(args, cfg, world, rank, dev, mega, ref, ours, random_kv, log, compiled=None, skipped=None,
               variants=None):
    """Graph-replay step times (us) of the models at the timed step (:func:`load_contexts`), and the copy bandwidth
    probe. ``ref``
    None: no torch + NCCL timing (ranks share a GPU). ``compiled``: the torch.compile'd torch model, compiled in its
    capture's warm-up; where that or the capture fails on any rank it is left out and the error goes to
    ``skipped["torch_compile"]``."""
    import torch
    import torch.distributed as dist

    from harness import capture_agreed, capture_calls, interleaved_medians

    models = {"mega": mega}
    models.update(variants or {})
    if ref is not None:
        models["torch_nccl"] = ref
    if ours is not None:
        models["torch_ours"] = ours
    if compiled is not None:
        models["torch_compile"] = compiled
    load_contexts(args, cfg, rank, world, dev, models.values(), random_kv)
    n = int(args.copy_gib * (1 << 30)) // 16 * 16
    src = torch.randn(n // 2, dtype=torch.bfloat16, device=dev)
    dst = torch.empty_like(src)
    acc = torch.empty((), dtype=torch.float32, device=dev)
    stream = torch.cuda.Stream()
    k = args.graph_steps
    graphs = {name: capture_calls(m.run, k, stream) for name, m in models.items() if name != "torch_compile"}
    if compiled is not None:
        t0, fails = time.time(), []
        g = capture_agreed("torch_compile", compiled.run, k, stream, failures=fails)
        if g is None:
            skipped["torch_compile"] = f"failed: {fails[0]['error']}"
            log(f"torch.compile({args.compile_mode}): {skipped['torch_compile']}")
        else:
            graphs["torch_compile"] = g
            log(f"torch.compile({args.compile_mode}): compiled and captured in {time.time() - t0:.1f} s")
    kc = max(1, min(k, 4))
    probes = {"memcpy": lambda: dst.copy_(src), "kernel_copy": lambda: torch.neg(src, out=dst),
              "read": lambda: torch.sum(src, dim=0, dtype=torch.float32, out=acc)}
    probe_graphs = {name: capture_calls(fn, kc, stream) for name, fn in probes.items()}
    dist.barrier()
    runs = {name: g.replay for name, g in graphs.items()}
    for r in runs.values():
        r()
    torch.cuda.synchronize()
    times = interleaved_medians(runs, k, args.reps)
    # interleaved_medians divides by one k for all runs: the probes (kc calls per graph) separately
    pus = interleaved_medians({name: g.replay for name, g in probe_graphs.items()}, kc, args.reps)
    gbs = {name: (1 if name == "read" else 2) * n / (us * 1e-6) / 1e9 for name, us in pus.items()}
    best = max(("memcpy", "kernel_copy"), key=lambda name: gbs[name])
    copy = dict(bytes=n, us=pus[best], bandwidth_gbs=gbs[best], method=best, probes_us=pus, probes_gbs=gbs,
                read_bandwidth_gbs=gbs["read"])
    log(f"copy {n / (1 << 30):.2f} GiB: memcpy {gbs['memcpy']:.0f} GB/s, kernel {gbs['kernel_copy']:.0f} GB/s "
        f"(read + write); read-only {gbs['read']:.0f} GB/s")
    return times, copy


def profile_step(args, cfg, w, rank, world, bkw, random_kv, dev, prefix="MEGA_KERNEL_TRACE"):
    """A profiled mega model (separate builder, options ``bkw``) at the timed position: trace + Gantt under
    ``--profile`` (files named ``prefix``)."""
    import torch

    from triton_dist.mega_triton_kernel.models import Qwen3MegaModel

    os.environ["MEGA_KERNEL_PROFILER_DIR"] = args.profile
    m = Qwen3MegaModel(cfg, w, rank, world, batch=args.batch, enable_profiling=True, **bkw)
    load_contexts(args, cfg, rank, world, dev, [m], random_kv)
    for _ in range(3):
        m.run()
    torch.cuda.synchronize()
    path = m.builder.dump_trace(prefix)
    from provenance import label_json

    label_json(path)  # the trace says where it ran (ranks sharing a GPU: no NVLink)
    ops = m.builder.op_timeline() if not args.runtime_scheduler else []
    return dict(trace=path, sm_activity=m.builder.get_sm_activity(), ops=ops, by_kind=timeline_by_kind(ops))


def timeline_by_kind(ops):
    """Per op kind (the op name without its ``L<layer>.`` prefixes), over the step: ``advance_us`` (how much later
    than the previous op in program order each op of the kind ended, summed: the step time splits into these),
    ``bytes``, ``gbs`` (bytes / advance) and the median first-tile / other-tile durations (us)."""
    import re
    import statistics

    kinds, prev_end = {}, 0.0
    for o in ops:
        kind = re.sub(r"L\d+\.", "", o["name"])
        k = kinds.setdefault(kind, dict(ops=0, advance_us=0.0, bytes=0.0, first=[], other=[]))
        k["ops"] += 1
        k["advance_us"] += max(0.0, o["end_us"] - prev_end)
        prev_end = max(prev_end, o["end_us"])
        k["bytes"] += o["bytes"]
        k["first"].append(o["first_tile_us"])
        if o["tile_us"] is not None:
            k["other"].append(o["tile_us"])
    for k in kinds.values():
        k["gbs"] = k["bytes"] / (k["advance_us"] * 1e3) if k["advance_us"] else None
        k["first_tile_us"] = statistics.median(k.pop("first"))
        other = k.pop("other")
        k["tile_us"] = statistics.median(other) if other else None
    return kinds


if __name__ == "__main__":
    sys.exit(main())
