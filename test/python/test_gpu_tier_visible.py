"""Makes the GPU tier's absence visible on CPU hosts: this test is skipped with the reason when no GPU tier can run,
and on the GPU machine it checks that the world really has two GPUs."""
import pytest


@pytest.mark.gpu
def test_gpu_tier_has_two_gpus():
    import torch

    assert torch.cuda.device_count() >= 2
