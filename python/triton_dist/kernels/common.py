"""Shared pieces of the collective kernels (public API only: ``dl.*`` and ``tl.*``; no asm, no target checks).

Signalling protocol used by every collective kernel in this package (see docs/collectives.md):

* **Epochs, not resets.** Each context owns a device-side ``counter`` array with one int64 slot per program id (and
  per peer for point-to-point). Program ``p`` of a launch bumps its own slot with one atomic (:func:`next_epoch`) and
  uses the new value ``e`` for every signal of this call. All ranks make the same sequence of calls with the same
  (fixed per context) grid, so program ``p`` has the same ``e`` on every rank without any host involvement: the
  kernels can be captured in a CUDA graph and replayed (the epoch lives in device memory, not in a kernel argument).
* **Same-program dependencies only.** Program ``p`` on one rank only ever waits for program ``p`` on a peer. That is
  deadlock free whether the programs of a launch run concurrently (GPU, sim ``run_grid``) or one after another
  (Triton's sequential interpreter), as long as all programs of a launch are co-resident on a GPU (grids are capped
  at the SM count). The pipelined kernels (``push_pipe``; ``two_shot_pipe`` runs two of them) split a launch into pusher and
  copier/reducer programs: a copier waits for the peers' pushers it serves, a pusher only for the previous call's
  ``done`` (never for any program of the running call); the argument is in ``allgather_push_pipe_kernel``.
* **Ready values carry a size tag.** ``ready = e * TAG_RANGE + (numel % TAG_RANGE)`` (``e << TAG_BITS | tag``), and
  every wait for a ready value is a tagged ``dl.wait`` (``tag_bits=TAG_BITS``): it waits until the peer's signal
  reaches epoch ``e`` and then compares the whole value, so a peer that launched the same call with a different
  element count (or made a different number of calls) is reported at once, not after a timeout: the GPU prints
  both calls' epoch and tag (element count mod 2**24) and traps, the simulator raises ``SimSignalMismatch`` (the
  ops name the user's call). Same cost as the equality wait (one compare per poll, one after it).
* **Fixed block ownership.** Buffer slots have a fixed stride (the context's capacity ``CAP``, not the call's size)
  and block ``b`` is always handled by program ``b % num_programs``, so a region of a buffer is always written and
  read by the same program id, whatever the sizes of successive calls (the per-program handshakes rely on it).
* **Rank and world size** are passed by the host (``rank`` argument, ``WORLD`` constexpr: loops over peers are
  unrolled); they equal ``dl.rank()`` / ``dl.num_ranks()`` for contexts on the SHMEM world.
* **Flagged words (the ``ll`` methods).** The latency kernels of every op have a variant without signals: data
  travels as 64-bit words ``(flag << 32) | 32 data bits`` (``dl.store_flagged`` / ``dl.load_flagged``), so a reader
  polls the data itself and the writer needs no fence and no second write. The flag is the program's epoch and
  the call's size tag (:func:`ll_flag`: ``epoch << 16 | numel % 2**16``); the reader waits for the epoch bits and
  reports a word of its call with another tag at once (``dl.load_flagged(..., tag_bits=16)``), like the tagged
  ready waits. Buffers are double-buffered by epoch parity like the one-shot all-reduce, and a reader clears the
  words it consumed (a plain store of 0: the next writer of that slot starts only after this launch ended), so an
  old word can never carry a later call's flag. Twice the bytes on the wire: for small messages only.
* **Buffer reuse.** Large kernels use a *done* handshake: after consuming what a peer wrote (or pulling what it
  staged) a program raises ``done = e`` on that peer; before touching a peer's buffer in call ``e`` a program waits
  for ``done == e - 1``. The latency kernel (one-shot all-reduce) double-buffers data and signals by ``e % 2``
  instead, which needs no wait before the first remote write.
"""
from __future__ import annotations

import triton.language as tl

import triton_dist
import triton_dist.language as dl

#: bits of the size tag: ready signal = epoch << TAG_BITS | (numel % TAG_RANGE)
TAG_BITS = 24
#: ready signal = epoch * TAG_RANGE + (numel % TAG_RANGE) (host code: an int)
TAG_RANGE = 1 << TAG_BITS
#: :data:`TAG_RANGE` for kernels (a jit function reads only constexpr globals)
TAG_RANGE_C = tl.constexpr(TAG_RANGE)
#: :data:`TAG_BITS` for kernels: ``dl.wait(..., tag_bits=TAG_BITS_C)`` on every ready signal
TAG_BITS_C = tl.constexpr(TAG_BITS)


def size_tag(numel: int) -> int:
    """Host-side size tag folded into ready signals."""
    return int(numel) % TAG_RANGE


@triton_dist.jit
def next_epoch(counter_ptr, slot):
    """Atomically bump ``counter[slot]`` and return the new value (int64, same in every thread of the program)."""
    return tl.atomic_add(counter_ptr + slot, 1, sem="relaxed") + 1


@triton_dist.jit
def program_epoch(counter_ptr, tag, WORLD: tl.constexpr):
    """Start of a collective program: ``(pid, nprog, e, ready, sig)``, with ``e`` this call's epoch
    (:func:`next_epoch` on slot ``pid``), ``ready = e * TAG_RANGE + tag`` and ``sig = pid * WORLD`` (the program's
    row of a ``[num_programs, WORLD]`` signal array)."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    e = next_epoch(counter_ptr, pid)
    return pid, nprog, e, e * TAG_RANGE_C + tag, pid * WORLD


@triton_dist.jit
def call_epoch(counter_ptr):
    """Epoch of the running launch of a *whole-launch* epoch counter (the overlapped GEMMs): ``counter[0] + 1``,
    where ``counter[0]`` counts the launches on this context that completed (advanced by :func:`finish_call`).
    Every program of a launch reads the same value: the counter only moves after all of them called
    :func:`finish_call`, and the next launch on the stream starts after this one ended. The epoch lives in device
    memory, so the launch can be captured in a CUDA graph and replayed."""
    return tl.atomic_add(counter_ptr, 0, sem="relaxed") + 1


@triton_dist.jit
def finish_call(counter_ptr, e):
    """Last statement of every program of a launch that read :func:`call_epoch`: counts the program in
    ``counter[1]``; the last of the launch's programs resets that count and publishes ``counter[0] = e`` (seen by
    the next launch on the stream)."""
    arrived = tl.atomic_add(counter_ptr + 1, 1, sem="acq_rel")
    if arrived == tl.num_programs(0) - 1:
        tl.atomic_xchg(counter_ptr + 1, 0, sem="relaxed")
        tl.atomic_xchg(counter_ptr, e, sem="release")


@triton_dist.jit
def wait_peers(sig_ptr, rank, WORLD: tl.constexpr, value):
    """Wait (sys scope, acquire) until ``sig_ptr[src] == value`` for every ``src != rank``; returns a token."""
    tok = tl.program_id(0) * 0
    for i in tl.static_range(1, WORLD):
        src = (rank + i) % WORLD
        tok = dl.wait(sig_ptr + src, 1, "sys", "acquire", value)
    return tok


@triton_dist.jit
def wait_ready_peers(sig_ptr, rank, WORLD: tl.constexpr, value):
    """:func:`wait_peers` for READY values (``e * TAG_RANGE + tag``): a tagged wait (``tag_bits=TAG_BITS``) that
    reports a peer whose signal for this call carries another size tag instead of waiting for it forever."""
    tok = tl.program_id(0) * 0
    for i in tl.static_range(1, WORLD):
        src = (rank + i) % WORLD
        tok = dl.wait(sig_ptr + src, 1, "sys", "acquire", value, tag_bits=TAG_BITS_C)
    return tok


@triton_dist.jit
def notify_peers(sig_ptr, rank, WORLD: tl.constexpr, value):
    """Raise ``sig_ptr[rank] = value`` on every peer (intra-node, system-scope release)."""
    for i in tl.static_range(1, WORLD):
        peer = (rank + i) % WORLD
        dl.notify(sig_ptr + rank, peer, value, "set", "intra_node")


@triton_dist.jit
def exchange(sig_ptr, rank, WORLD: tl.constexpr, value):
    """:func:`notify_peers` then :func:`wait_ready_peers` with the same (ready) ``value``; returns the wait's token."""
    notify_peers(sig_ptr, rank, WORLD, value)
    return wait_ready_peers(sig_ptr, rank, WORLD, value)


@triton_dist.jit
def acquire_buffer(buf_ptr, done_ptr, rank, WORLD: tl.constexpr, e):
    """Done handshake before writing in call ``e``: wait until every peer raised ``done_ptr[src] == e - 1``, then
    return ``buf_ptr`` carrying the wait's token."""
    tok = wait_peers(done_ptr, rank, WORLD, e - 1)
    return dl.consume_token(buf_ptr, tok)


@triton_dist.jit
def store_to_peers(buf_ptr, off, offs, v, mask, rank, WORLD: tl.constexpr):
    """Store ``v`` at ``off + offs`` of every peer's copy of the symmetric buffer ``buf_ptr`` (``dl.symm_at``)."""
    for i in tl.static_range(1, WORLD):
        peer = (rank + i) % WORLD
        tl.store(dl.symm_at(buf_ptr, peer) + off + offs, v, mask=mask)


@triton_dist.jit
def add_peer_slots(acc, slots_ptr, offs, mask, rank, CAP, WORLD: tl.constexpr):
    """``acc`` plus ``slots[src * CAP + offs]`` (as fp32) for every peer ``src``, in order ``rank + 1, ...``."""
    for i in tl.static_range(1, WORLD):
        src = (rank + i) % WORLD
        acc += tl.load(slots_ptr + src * CAP + offs, mask=mask).to(tl.float32)
    return acc


@triton_dist.jit
def copy_blocks(src_ptr, dst_ptr, n, pid, nprog, BLOCK: tl.constexpr):
    """``dst[0:n] = src[0:n]``, blocks ``pid, pid + nprog, ...`` of ``BLOCK`` elements (vectorised accesses)."""
    nblk = tl.cdiv(n, BLOCK)
    b = pid
    while b < nblk:
        offs = b * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        v = tl.load(src_ptr + offs, mask=mask)
        tl.store(dst_ptr + offs, v, mask=mask)
        b += nprog


@triton_dist.jit
def pipe_plan(n, npush, seg_blocks, SEG: tl.constexpr, BLOCK: tl.constexpr):
    """Segmenting of a pipelined (``push_pipe``) call of ``n`` elements: returns ``(nblk, nseg, K)``.

    ``nblk = cdiv(n, BLOCK)`` blocks; pusher ``q`` (of ``npush``) owns blocks ``q, q + npush, ...`` (local index
    ``j``); its segment ``s`` is local indices ``[s * K, (s + 1) * K)``. ``nseg = clamp(cdiv(nblk, npush) //
    seg_blocks, 1, SEG)`` (at least ``seg_blocks`` blocks per segment, at most ``SEG`` segments: small calls get one
    segment) and ``K = cdiv(cdiv(nblk, npush), nseg)``. A function of ``n`` and the channel's fixed parameters
    only, so every rank computes the same plan for the same call."""
    nblk = tl.cdiv(n, BLOCK)
    per = tl.cdiv(nblk, npush)
    nseg = per // seg_blocks
    if nseg < 1:
        nseg = 1
    if nseg > SEG:
        nseg = SEG
    return nblk, nseg, tl.cdiv(per, nseg)


@triton_dist.jit
def pipe_segment_end(nblk, q, npush, j0, K):
    """End (exclusive local index) of the segment starting at local index ``j0`` of pusher ``q``: ``min(j0 + K,
    number of blocks q owns)``; pusher ``q < npush`` owns blocks ``q, q + npush, ... < nblk``."""
    jend = j0 + K
    owned = (nblk - q + npush - 1) // npush
    if jend > owned:
        jend = owned
    return jend


@triton_dist.jit
def release_served_pushers(done_ptr, c, npush, nserve, rank, WORLD: tl.constexpr, e):
    """End of a pipelined kernel's consumer program ``c`` (of ``nserve``): it has read every peer's slot blocks of
    the pushers it serves (``c, c + nserve, ... < npush``), so it raises ``done[q, rank] = e`` on every peer for each
    of them (``done``: ``[npush, WORLD]``); those peers' pushers ``q`` may then overwrite that slot next call."""
    q = c
    while q < npush:
        notify_peers(done_ptr + q * WORLD, rank, WORLD, e)
        q += nserve


# ---------------------------------------------------------------------------------------------------------------
# host-side signalling kernels (used by the copy-engine paths: a signal write around torch copies)
# ---------------------------------------------------------------------------------------------------------------
@triton_dist.jit
def ce_enter_kernel(done_ptr, counter_ptr, rank, WORLD: tl.constexpr):
    """Copy-engine protocol, step 1 (one program): bump the epoch, then wait until every peer finished reading
    this rank's staging buffer in the previous call (``done[src] == e - 1``)."""
    e = next_epoch(counter_ptr, 0)
    wait_peers(done_ptr, rank, WORLD, e - 1)


@triton_dist.jit
def ce_ready_kernel(ready_ptr, counter_ptr, tag, rank, WORLD: tl.constexpr):
    """Step 2: publish ``ready = e * TAG_RANGE + tag`` to every peer (after the staging copy, stream order), then
    wait for every peer's ready signal."""
    e = tl.load(counter_ptr)
    exchange(ready_ptr, rank, WORLD, e * TAG_RANGE_C + tag)


@triton_dist.jit
def ce_done_kernel(done_ptr, counter_ptr, rank, WORLD: tl.constexpr):
    """Step 3 (after the peer copies, stream order): tell every peer that its staging buffer was read."""
    e = tl.load(counter_ptr)
    notify_peers(done_ptr, rank, WORLD, e)


@triton_dist.jit
def wait_flag_reset_kernel(flag_ptr):
    """One program: wait (system scope, acquire) until the local int64 ``flag[0] == 1``, then store 0. The kernel
    form of a stream's wait-value + write-value (``runtime.stream_ops``), for devices without stream memory
    operations. A 0/1 flag needs no epoch: its consumer resets it before the call ends, and the producer raises it
    again only after the next call's handshake."""
    tok = dl.wait(flag_ptr, 1, "sys", "acquire", 1)
    tl.store(dl.consume_token(flag_ptr, tok), 0)


# ---------------------------------------------------------------------------------------------------------------
# flagged-word (``ll``) helpers: a block of BW 32-bit words of an element array of n elements, EPW elements per
# word (4-byte dtypes: 1, 2-byte: 2, 1-byte: 4; element 0 in the lowest bits), zero padded past n
# ---------------------------------------------------------------------------------------------------------------
#: size-tag bits of the ``ll`` flags (``dl.load_flagged(..., tag_bits=LL_TAG_BITS)``): flag = epoch << 16 | tag
LL_TAG_BITS = 16
LL_TAG_BITS_C = tl.constexpr(LL_TAG_BITS)


def ll_size_tag(numel: int) -> int:
    """Host-side size tag of the ``ll`` flags (the element count mod 2**16)."""
    return int(numel) % (1 << LL_TAG_BITS)


@triton_dist.jit
def ll_flag(e, tag):
    """The flag of epoch ``e >= 1`` and size tag ``tag < 2**16``: ``(((e - 1) % (2**15 - 1)) + 1) << 16 | tag``
    (int32 > 0; its epoch bits are never 0, those of an empty word)."""
    return ((((e - 1) % 0x7FFF) + 1) * 65536 + tag).to(tl.int32)


@triton_dist.jit
def ll_program(counter_ptr, n, tag, EPW: tl.constexpr, BW: tl.constexpr):
    """Start of an ``ll`` program for a message of ``n`` elements (``EPW`` per word, blocks of ``BW`` words):
    ``(pid, nprog, flag, par, nw, nblk)`` -- this call's epoch drawn from ``counter[pid]``, its flag
    (:func:`ll_flag` with ``tag``), the buffer parity ``e % 2``, the message's words and blocks."""
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    e = next_epoch(counter_ptr, pid)
    nw = tl.cdiv(n, EPW)
    return pid, nprog, ll_flag(e, tag), e % 2, nw, tl.cdiv(nw, BW)


@triton_dist.jit
def ll_elem_offsets(w0, BW: tl.constexpr, EPW: tl.constexpr):
    """Element offsets of words ``w0 .. w0 + BW``: ``[BW]`` (EPW 1), ``[BW, 2]`` (2) or ``[BW, 2, 2]`` (4)."""
    wi = w0 + tl.arange(0, BW)
    if EPW == 1:
        return wi
    elif EPW == 2:
        return wi[:, None] * 2 + tl.arange(0, 2)[None, :]
    else:
        return wi[:, None, None] * 4 + tl.arange(0, 2)[None, :, None] * 2 + tl.arange(0, 2)[None, None, :]


@triton_dist.jit
def ll_load_words(ptr, w0, n, BW: tl.constexpr, EPW: tl.constexpr):
    """Words ``w0 .. w0 + BW`` of ``ptr[0:n]`` as int32 ``[BW]`` (the elements' bits, packed)."""
    e = ll_elem_offsets(w0, BW, EPW)
    if EPW == 1:
        return tl.load(ptr + e, mask=e < n, other=0).to(tl.int32, bitcast=True)
    elif EPW == 2:
        v = tl.load(ptr + e, mask=e < n, other=0).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF
        lo, hi = tl.split(v)
        return lo | (hi << 16)
    else:
        v = tl.load(ptr + e, mask=e < n, other=0).to(tl.int8, bitcast=True).to(tl.int32) & 0xFF
        b0, b1 = tl.split(v)
        lo, hi = tl.split(b0 | (b1 << 8))
        return lo | (hi << 16)


@triton_dist.jit
def ll_store_words(ptr, w0, n, words, BW: tl.constexpr, EPW: tl.constexpr):
    """Store the int32 words ``[BW]`` as elements ``ptr[w0 * EPW ...]`` (only those below ``n``)."""
    e = ll_elem_offsets(w0, BW, EPW)
    dt = ptr.dtype.element_ty
    if EPW == 1:
        v = words.to(dt, bitcast=True)
    elif EPW == 2:
        v = tl.join(words.to(tl.int16), (words >> 16).to(tl.int16)).to(dt, bitcast=True)
    else:
        halves = tl.join(words & 0xFFFF, (words >> 16) & 0xFFFF)
        v = tl.join(halves.to(tl.int8), (halves >> 8).to(tl.int8)).to(dt, bitcast=True)
    tl.store(ptr + e, v, mask=e < n)


@triton_dist.jit
def ll_load_f32(ptr, w0, n, BW: tl.constexpr, EPW: tl.constexpr):
    """Elements of words ``w0 .. w0 + BW`` of ``ptr[0:n]`` as fp32, shaped as :func:`ll_elem_offsets` (0 past n)."""
    e = ll_elem_offsets(w0, BW, EPW)
    return tl.load(ptr + e, mask=e < n, other=0).to(tl.float32)


@triton_dist.jit
def ll_words_f32(words, DT: tl.constexpr, EPW: tl.constexpr):
    """int32 words of ``DT`` elements (4- or 2-byte) as fp32, shaped as :func:`ll_elem_offsets`."""
    if EPW == 1:
        return words.to(DT, bitcast=True).to(tl.float32)
    else:
        return tl.join(words.to(tl.int16), (words >> 16).to(tl.int16)).to(DT, bitcast=True).to(tl.float32)


@triton_dist.jit
def ll_store_f32(ptr, w0, n, acc, BW: tl.constexpr, EPW: tl.constexpr):
    """Round ``acc`` (shaped as :func:`ll_elem_offsets`) to ``ptr``'s dtype and store the elements below ``n``."""
    e = ll_elem_offsets(w0, BW, EPW)
    tl.store(ptr + e, acc.to(ptr.dtype.element_ty), mask=e < n)


@triton_dist.jit
def ll_send(buf_ptr, slot, w0, words, nw, flag, peer, BW: tl.constexpr):
    """Flagged store of ``words`` (words ``w0 .. w0 + BW`` of a message of ``nw`` words) into word ``slot + w0`` of
    ``peer``'s symmetric int64 buffer ``buf_ptr``."""
    wi = w0 + tl.arange(0, BW)
    dl.store_flagged(dl.symm_at(buf_ptr, peer) + slot + wi, words, flag, mask=wi < nw)


@triton_dist.jit
def ll_send_to_peers(buf_ptr, par, w0, words, nw, flag, rank, CAPW, WORLD: tl.constexpr, BW: tl.constexpr):
    """:func:`ll_send` of the same ``words`` to slot ``[par, rank]`` of every peer (in order ``rank + 1, ...``)."""
    for i in tl.static_range(1, WORLD):
        ll_send(buf_ptr, (par * WORLD + rank) * CAPW, w0, words, nw, flag, (rank + i) % WORLD, BW)


@triton_dist.jit
def ll_add_peers(acc, buf_ptr, par, w0, nw, flag, rank, CAPW, DT: tl.constexpr, WORLD: tl.constexpr,
                 BW: tl.constexpr, EPW: tl.constexpr):
    """``acc`` (fp32, shaped as :func:`ll_elem_offsets`) plus the ``DT`` elements of words ``w0 .. w0 + BW`` of every
    peer's slot ``[par, src]`` of this rank's buffer, in order ``src = rank + 1, rank + 2, ...`` (:func:`ll_receive`:
    waited for, then cleared)."""
    for i in tl.static_range(1, WORLD):
        src = (rank + i) % WORLD
        acc += ll_words_f32(ll_receive(buf_ptr, (par * WORLD + src) * CAPW, w0, nw, flag, BW), DT, EPW)
    return acc


@triton_dist.jit
def ll_receive(buf_ptr, slot, w0, nw, flag, BW: tl.constexpr):
    """Wait for words ``w0 .. w0 + BW`` (of ``nw``) flagged ``flag`` (:func:`ll_flag`; a word of this call with
    another size tag is reported at once) at word ``slot + w0`` of this rank's buffer, return them (int32 ``[BW]``)
    and clear them (consumed; see the module docstring)."""
    wi = w0 + tl.arange(0, BW)
    p = buf_ptr + slot + wi
    words = dl.load_flagged(p, flag, mask=wi < nw, tag_bits=LL_TAG_BITS_C)
    tl.store(p, 0, mask=wi < nw)
    return words
