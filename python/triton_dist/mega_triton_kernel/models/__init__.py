"""Models built on the mega kernel: :mod:`.qwen3` (the Qwen3 dense decoder, one decode step per kernel, with its
plain-torch reference)."""
from .qwen3 import (QWEN3_8B, QWEN3_32B, STEP_BYTES_FORMULA, Qwen3Config, Qwen3MegaModel, Qwen3TorchModel, Qwen3Weights,
                    logits_agreement, random_kv, random_weights, step_bytes, teacher_forced_check)

__all__ = ["Qwen3Config", "QWEN3_8B", "QWEN3_32B", "Qwen3Weights", "random_weights", "random_kv", "Qwen3MegaModel",
           "Qwen3TorchModel", "teacher_forced_check", "logits_agreement", "step_bytes", "STEP_BYTES_FORMULA"]
