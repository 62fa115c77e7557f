"""Models as people bring them: Hugging Face architectures from small configs with random weights
(no downloads), and a hand-written ResNet-18. Shared by tests/frontend/test_zoo.py and
benchmarks/model_zoo.py."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import torch
import transformers
from torch import nn

VOCAB, HIDDEN, FFN, LAYERS, HEADS, KV_HEADS, SEQ = 256, 128, 256, 2, 4, 2, 16
DECODER = {"vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": FFN, "num_hidden_layers": LAYERS,
           "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "max_position_embeddings": 128,
           "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
ENCODER = {"vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": FFN, "num_hidden_layers": LAYERS,
           "num_attention_heads": HEADS, "max_position_embeddings": 128, "pad_token_id": 0}


def _decoder(config: str, **extra: Any) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        cfg = getattr(transformers, config)(**{**DECODER, **extra})
        return transformers.AutoModelForCausalLM.from_config(cfg)
    return build


def _encoder(config: str, head: str = "AutoModel", **extra: Any) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        cfg = getattr(transformers, config)(**{**ENCODER, **extra})
        return getattr(transformers, head).from_config(cfg)
    return build


def _gpt2() -> nn.Module:
    cfg = transformers.GPT2Config(vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_positions=128,
                                  bos_token_id=1, eos_token_id=2)
    return transformers.GPT2LMHeadModel(cfg)


def _t5() -> nn.Module:
    cfg = transformers.T5Config(vocab_size=VOCAB, d_model=HIDDEN, d_kv=HIDDEN // HEADS, d_ff=FFN, num_layers=LAYERS,
                                num_heads=HEADS, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    return transformers.T5ForConditionalGeneration(cfg)


def _vit() -> nn.Module:
    cfg = transformers.ViTConfig(hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS,
                                 num_attention_heads=HEADS, image_size=32, patch_size=8)
    return transformers.ViTModel(cfg)


class MeanPooled(nn.Module):
    """A sentence-embedding model: an encoder's last hidden states averaged over the real tokens."""

    def __init__(self):
        super().__init__()
        self.encoder = _encoder("BertConfig")()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1)


class _Basic(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.conv2, self.bn2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(out + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    """ResNet-18 written out (two basic blocks per stage), for 32x32 images."""

    def __init__(self, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        widths, blocks, cin = (64, 128, 256, 512), [], 64
        for i, w in enumerate(widths):
            blocks += [_Basic(cin, w, 1 if i == 0 else 2), _Basic(w, w, 1)]
            cin = w
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


def _ids() -> dict[str, torch.Tensor]:
    return {"input_ids": torch.randint(3, VOCAB, (1, SEQ), generator=torch.Generator().manual_seed(5))}


def _masked_ids() -> dict[str, torch.Tensor]:
    ids = _ids()["input_ids"]
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def _seq2seq() -> dict[str, torch.Tensor]:
    ids = _ids()["input_ids"]
    return {"input_ids": ids, "decoder_input_ids": ids[:, :4]}


def _image(key: str = "pixel_values") -> dict[str, torch.Tensor]:
    return {key: torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(5))}


# name: (build, inputs, decoder (generates text))
MODELS: dict[str, tuple[Callable[[], nn.Module], Callable[[], dict[str, torch.Tensor]], bool]] = {
    "gpt2": (_gpt2, _ids, True),
    "llama": (_decoder("LlamaConfig"), _ids, True),
    "granite": (_decoder("GraniteConfig"), _ids, True),
    "granitemoe": (_decoder("GraniteMoeConfig", num_local_experts=4, num_experts_per_tok=2), _ids, True),
    "qwen2": (_decoder("Qwen2Config"), _ids, True),
    "qwen3": (_decoder("Qwen3Config", head_dim=HIDDEN // HEADS), _ids, True),
    "mistral": (_decoder("MistralConfig"), _ids, True),
    "mixtral": (_decoder("MixtralConfig", num_local_experts=4, num_experts_per_tok=2), _ids, True),
    "gemma": (_decoder("GemmaConfig", head_dim=HIDDEN // HEADS), _ids, True),
    "gemma2": (_decoder("Gemma2Config", head_dim=HIDDEN // HEADS), _ids, True),
    "gemma3": (_decoder("Gemma3TextConfig", head_dim=HIDDEN // HEADS), _ids, True),
    "phi3": (_decoder("Phi3Config"), _ids, True),
    "bert": (_encoder("BertConfig"), _masked_ids, False),
    "roberta": (_encoder("RobertaConfig", pad_token_id=1), _masked_ids, False),
    "t5": (_t5, _seq2seq, False),
    "vit": (_vit, _image, False),
    "mean-pooled-bert": (MeanPooled, _masked_ids, False),
    "resnet18": (ResNet18, lambda: _image("x"), False),
}


def build(name: str) -> tuple[nn.Module, dict[str, torch.Tensor]]:
    """The model (fp16, eval, seeded weights) and its example inputs."""
    make, inputs, _ = MODELS[name]
    torch.manual_seed(0)
    return make().half().eval(), {k: v.half() if v.is_floating_point() else v for k, v in inputs().items()}


def near_router_ties(model: nn.Module, inputs: dict[str, torch.Tensor]) -> set[int]:
    """Token positions where a mixture-of-experts router is a near tie in float32: the last chosen and
    the first unchosen expert's logits within two DLFloat16 steps (2 * 2^-9 of their magnitude). The
    card rounds its logits to DLFloat16 and may route such a token to the other expert, as it would."""
    model, logits = copy.deepcopy(model).float(), []
    for module in model.modules():
        if type(module).__name__.endswith("TopKRouter"):
            module.register_forward_hook(lambda m, i, out: logits.append(out[0] if isinstance(out, tuple) else out))
    with torch.no_grad():
        model(**{k: v.float() if v.is_floating_point() else v for k, v in inputs.items()})
    k, ties = model.config.num_experts_per_tok if logits else 0, set()
    for layer in logits:
        top = layer.reshape(-1, layer.shape[-1]).float().sort(-1, descending=True).values[:, k - 1:k + 1]
        ties |= set(torch.nonzero(top[:, 0] - top[:, 1] <= 2 ** -8 * top.abs().amax(-1)).flatten().tolist())
    return ties


def first_output(out: Any) -> torch.Tensor:
    """The tensor a model's call is judged by: logits, else the last hidden state, else the output."""
    for field in ("logits", "last_hidden_state"):
        if hasattr(out, field):
            return getattr(out, field)
    return out
