"""The Qwen3 dense decoder on the mega kernel (``mega_triton_kernel/models/qwen3.py``): the toy config's
teacher-forced logits against the plain-torch reference (``Qwen3TorchModel``) on the simulator at world 1 and 2
(the reference's all-reduce through gloo), several decode steps from an empty cache and from a filled one whose
next steps cross a page boundary; plus the reference's tensor-parallel consistency and the argument checks."""
import threading

import pytest
import torch

from triton_dist.mega_triton_kernel.models import (QWEN3_8B, QWEN3_32B, Qwen3Config, Qwen3TorchModel, random_kv,
                                                   random_weights, step_bytes)



def test_reference_shards_sum_to_the_unsharded_model():
    """Qwen3TorchModel at world 2 (two threads, the all-reduce a barrier-and-sum) computes the world-1 model's
    logits: the shards of random_weights / random_kv are slices of the same model."""
    cfg = Qwen3Config.toy()
    toks = [3, 77, 500, 12]
    one = Qwen3TorchModel(cfg, random_weights(cfg, 0, 1))
    one.load_kv(random_kv(cfg, 14, 0, 1))
    want = [one.step(t) for t in toks]
    bar, slots, got = threading.Barrier(2), [None, None], {}

    def work_(r):
        def ar(x):
            slots[r] = x.float().clone()
            bar.wait()
            s = (slots[0] + slots[1]).to(x.dtype)
            bar.wait()
            return s

        m = Qwen3TorchModel(cfg, random_weights(cfg, r, 2), r, 2, all_reduce=ar)
        m.load_kv(random_kv(cfg, 14, r, 2))
        got[r] = [m.step(t) for t in toks]

    th = [threading.Thread(target=work_, args=(r, )) for r in (0, 1)]
    for t in th:
        t.start()
    for t in th:
        t.join(60)
    for a, b, c in zip(want, got[0], got[1]):
        assert torch.equal(b, c)
        assert torch.nn.functional.cosine_similarity(a, b).item() > 0.9999
        assert a.argmax() == b.argmax()
    assert 0.5 < want[-1].std().item() < 2.0  # the weight scales keep logits of order one
    # the layers matter: the logits are far from those of the token's embedding alone
    w = one.weights
    e = w.embed[toks[-1]:toks[-1] + 1].float()
    e = e * torch.rsqrt(e.pow(2).mean() + cfg.rms_eps) * w.final_norm.float()
    assert torch.nn.functional.cosine_similarity(want[-1], e @ w.lm_head.float().T).item() < 0.95


def test_presets_and_bytes():
    assert (QWEN3_8B.hidden_size, QWEN3_8B.num_layers, QWEN3_8B.num_q_heads, QWEN3_8B.num_kv_heads,
            QWEN3_8B.intermediate_size, QWEN3_8B.vocab_size) == (4096, 36, 32, 8, 12288, 151936)
    assert (QWEN3_32B.hidden_size, QWEN3_32B.num_layers, QWEN3_32B.num_q_heads, QWEN3_32B.num_kv_heads,
            QWEN3_32B.intermediate_size) == (5120, 64, 64, 8, 25600)
    b1, b2 = step_bytes(QWEN3_8B, 1, 512), step_bytes(QWEN3_8B, 2, 512)
    # Qwen3-8B: 6.95e9 linear parameters in the layers + 0.62e9 in lm_head, bf16
    assert 15.1e9 < b1["weights"] < 15.2e9, b1
    assert b1["kv"] == 36 * 2 * 512 * 8 * 128 * 2 and b2["kv"] == b1["kv"] // 2
    assert b2["weights"] == (b1["weights"] - 151936 * 4096 * 2) // 2 + 151936 * 4096 * 2
    cfg = Qwen3Config.toy()
    w = random_weights(cfg, 1, 2)
    assert w.linear_bytes() == step_bytes(cfg, 2, 1)["weights"]
    assert list(w.layers[0].wqkv.shape) == [(2 + 2) * 64, 256] and list(w.layers[0].w2.shape) == [256, 256]


@pytest.mark.parametrize("kw, msg", [
    (dict(num_q_heads=6, num_kv_heads=4), "num_q_heads 6 is not a multiple of num_kv_heads 4"),
    (dict(head_dim=63), "head_dim must be even"),
    (dict(hidden_size=0), "hidden_size must be an int >= 1"),
    (dict(rms_eps=0.0), "rms_eps must be a positive number"),
    (dict(page_size=2.5), "page_size must be an int >= 1"),
])
def test_bad_config(kw, msg):
    with pytest.raises(ValueError, match=msg):
        Qwen3Config.toy(**kw)


def test_bad_world_rank_weights_and_tokens():
    cfg = Qwen3Config.toy()
    with pytest.raises(ValueError, match="num_kv_heads=2 is not divisible by the world size 4"):
        random_weights(cfg, 0, 4)
    with pytest.raises(ValueError, match="world size must be an int >= 1"):
        random_weights(cfg, 0, 0)
    with pytest.raises(ValueError, match=r"rank must be an int in \[0, world=2\)"):
        random_weights(cfg, 2, 2)
    with pytest.raises(TypeError, match="dtype must be"):
        random_weights(cfg, dtype=torch.int8)
    w = random_weights(cfg, 0, 2)
    with pytest.raises(ValueError, match="the weights are rank 0 of 2's shard, the model is rank 0 of 1"):
        Qwen3TorchModel(cfg, w)
    with pytest.raises(ValueError, match="another Qwen3Config"):
        Qwen3TorchModel(cfg.replace(num_layers=1), w, 0, 2)
    m = Qwen3TorchModel(cfg, random_weights(cfg))
    with pytest.raises(ValueError, match=r"token must be an int in \[0, vocab_size=512\)"):
        m.step(512)
    with pytest.raises(ValueError, match="load_kv: layer 0 k has shape"):
        m.load_kv([(torch.zeros(3, 1, 64), torch.zeros(3, 1, 64))] * 2)
    with pytest.raises(ValueError, match="leave no room"):
        m.load_kv(random_kv(cfg, 64))
    m.load_kv(random_kv(cfg, 63))
    m.step(1)
    with pytest.raises(ValueError, match="more than max_context=64"):
        m.step(1)
    m.reset()
    m.step(1)
