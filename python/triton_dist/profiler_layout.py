"""The profiler buffer layout, shared by the device side (``Profiler``) and the host side (parse / export).

A profiler buffer is a flat array of 64-bit words (``torch.int64``; ``uint64`` is accepted too). ``-1`` (all ones)
marks an empty word: :func:`reset_profiler_buffer` fills the record area with it.

=========  ======================================================================================================
word       meaning
=========  ======================================================================================================
0          ``MAGIC`` (written by the host at allocation / reset)
1          total number of words in the buffer (host)
2          ``num_programs`` (low 32 bits) | ``num_groups`` (high 32 bits) (device: program 0, when profiling is on)
3          timer ticks per second of the clock the device wrote (device: 1e9 for NVIDIA ``%globaltimer`` and the
           simulator's nanosecond wall clock, 1e8 for AMD ``s_memrealtime``)
4 .. 7     reserved (0)
8 ..       records, one *track* after another. Track ``t = program_id * num_groups + group_id`` (program id
           linearised x-fastest) owns ``capacity = (total - 8) // (2 * num_programs * num_groups)`` record slots;
           slot ``k`` of track ``t`` is the two words at ``8 + 2 * (t * capacity + k)``.
=========  ======================================================================================================

A record is two words:

* word A (*tag*): bits 0..31 ``task_type << 1 | is_start``; bits 32..62 the SM id (NVIDIA ``%smid``, AMD a CU id
  built from ``HW_ID`` / ``XCC_ID``, simulator: the linear program id). Never ``-1`` for a written record.
* word B: the timestamp in timer ticks (see word 3).

Records past a track's capacity are dropped on the device (never written out of bounds); the host reports how many
tracks were full.
"""
from __future__ import annotations

MAGIC = 0x5444_5052_4F46_0001  # "TDPROF" + version 1
HEADER_WORDS = 8
WORDS_PER_RECORD = 2
EMPTY = -1
MAX_TASK_TYPE = (1 << 30) - 1

W_MAGIC = 0
W_TOTAL = 1
W_GRID = 2
W_TICKS = 3


def words_for_slots(max_num_profile_slots: int) -> int:
    """Buffer length in 64-bit words for ``max_num_profile_slots`` records (shared by all tracks)."""
    return HEADER_WORDS + WORDS_PER_RECORD * int(max_num_profile_slots)


def capacity_per_track(total_words: int, num_tracks: int) -> int:
    """Record slots each track owns in a buffer of ``total_words`` words shared by ``num_tracks`` tracks."""
    if num_tracks <= 0:
        return 0
    return max(0, (total_words - HEADER_WORDS) // (WORDS_PER_RECORD * num_tracks))


def encode_tag(is_start: bool, task_type: int, sm_id: int) -> int:
    """Word A of a record, as a signed 64-bit int (what an int64 buffer holds)."""
    v = ((int(sm_id) & 0x7FFF_FFFF) << 32) | ((int(task_type) << 1) | (1 if is_start else 0))
    return v - (1 << 64) if v >= (1 << 63) else v


def decode_tag(word: int):
    """``(is_start, task_type, sm_id)`` of word A."""
    w = int(word) & 0xFFFF_FFFF_FFFF_FFFF
    low = w & 0xFFFF_FFFF
    return bool(low & 1), low >> 1, (w >> 32) & 0x7FFF_FFFF
