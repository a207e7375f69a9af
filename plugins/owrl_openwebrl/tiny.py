"""Tiny checkpoints with random weights, built on the spot: Qwen-VL families and a text-only Llama.

They exist so that the real loading, prompting, generation and training code runs on a
machine that cannot download the real weights: same architecture classes, same files
(config, safetensors, tokenizer with the special tokens and a chat template, image
processor config), only tiny. Their output is random; they prove plumbing, not skill.

    owrl model tiny DIR [--family qwen3-vl|qwen2-vl|qwen2.5-vl|llama]
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from .judge import JUDGE_SYSTEM
from .profiles import OPENWEBRL_TOOLS
from .prompt import SYSTEM

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedConfig, PreTrainedModel, PreTrainedTokenizerFast

SPECIAL_TOKENS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
    "<|image_pad|>", "<|video_pad|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
    "<tool_response>", "</tool_response>",
]

#: A Qwen-style chat template written for owrl: tools in a <tools> block, images as
#: vision-start/image-pad/vision-end, consecutive tool messages grouped in one user turn.
CHAT_TEMPLATE = (
    "{%- macro text(c) -%}{%- if c is string -%}{{ c }}{%- else -%}{%- for p in c -%}"
    "{%- if p.type == 'image' -%}<|vision_start|><|image_pad|><|vision_end|>"
    "{%- elif p.type == 'text' -%}{{ p.text }}{%- endif -%}{%- endfor -%}{%- endif -%}{%- endmacro -%}"
    "{%- if tools -%}<|im_start|>system{{ '\\n' }}"
    "{%- if messages[0].role == 'system' -%}{{ text(messages[0].content) }}{{ '\\n\\n' }}{%- endif -%}"
    "# Tools{{ '\\n' }}<tools>"
    "{%- for tool in tools -%}{{ '\\n' }}{{ tool | tojson }}{%- endfor -%}"
    "{{ '\\n' }}</tools><|im_end|>{{ '\\n' }}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if message.role == 'system' and tools -%}"
    "{%- elif message.role == 'tool' -%}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}<|im_start|>user{%- endif -%}"
    "{{ '\\n' }}<tool_response>{{ '\\n' }}{{ text(message.content) }}{{ '\\n' }}</tool_response>"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}<|im_end|>{{ '\\n' }}{%- endif -%}"
    "{%- else -%}<|im_start|>{{ message.role }}{{ '\\n' }}{{ text(message.content) }}<|im_end|>{{ '\\n' }}"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_start|>assistant{{ '\\n' }}{%- endif -%}"
)

_CORPUS = [
    '<think>I should click the button</think><tool_call>{"name": "click", "arguments": {"point_2d": [500, 300]}}</tool_call>',
    '<tool_call>{"name": "write", "arguments": {"message": "blue shirt", "ref": "e12"}}</tool_call>',
    '<tool_call>{"name": "done", "arguments": {"response": "The price is 19.99"}}</tool_call>',
    '{"name": "scroll", "arguments": {"direction": "down", "amount": 3}} press_keys goto_url go_back hover drag select_option',
    "Task: buy a red hat in size M. Page: http://127.0.0.1:8000/ Title: Demo shop. expect url_contains",
    "The task is complete. Success. Failure. verdict score reason constraints 0 1 2 3 4 5 6 7 8 9",
]


def _corpus() -> list[str]:
    """Sample text plus owrl's own prompts, so the prompts tokenize compactly."""
    # the tool schema this plugin's policy sends (its own copy of the released one)
    return list(_CORPUS) + [SYSTEM, JUDGE_SYSTEM] + [json.dumps(t) for t in OPENWEBRL_TOOLS]


def build_tokenizer(vocab_size: int = 1024) -> PreTrainedTokenizerFast:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_corpus() * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]  # transformers leaves __init__ unannotated
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        additional_special_tokens=SPECIAL_TOKENS[1:])
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _token_id(tok: PreTrainedTokenizerFast, token: str) -> int:
    """The id of one token (transformers types the lookup for a list of tokens too)."""
    found = tok.convert_tokens_to_ids(token)
    assert isinstance(found, int)
    return found


def build_tiny_text(out: Union[str, Path], seed: int = 0) -> Path:
    """Write a tiny random text-only Llama (no vision config: the ``text`` backend kind)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer()
    eos, pad = _token_id(tok, "<|im_end|>"), _token_id(tok, "<|endoftext|>")
    config = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         initializer_range=0.25, tie_word_embeddings=True, bos_token_id=None, eos_token_id=eos,
                         pad_token_id=pad)
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = eos
    model.generation_config.pad_token_id = pad
    model.save_pretrained(out)
    tok.save_pretrained(out)
    (out / "owrl_tiny.json").write_text(json.dumps({"family": "llama", "seed": seed}))
    return out


def build_tiny_vl(out: Union[str, Path], family: str = "qwen3-vl", seed: int = 0) -> Path:
    """Write a tiny random ``family`` checkpoint to ``out`` and return the path."""
    import torch

    if family == "llama":
        return build_tiny_text(out, seed)
    from transformers import Qwen2VLImageProcessorPil

    torch.manual_seed(seed)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer()
    ids = {t: _token_id(tok, t) for t in SPECIAL_TOKENS}
    vocab = len(tok)
    common = dict(image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
                  vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"])
    # A larger init than real models use: with hidden size 64 and the usual 0.02 the tied
    # embeddings cap every logit near zero, and a LoRA adapter could not move the output.
    text = dict(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2, initializer_range=0.25,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                bos_token_id=None, eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"])
    if family == "qwen3-vl":
        config, model_cls, patch = _qwen3_vl(text, common)
    elif family in ("qwen2-vl", "qwen2.5-vl"):
        config, model_cls, patch = _qwen2_vl(family, text, common)
    else:
        raise ValueError(f"unknown family {family!r}: qwen3-vl, qwen2-vl or qwen2.5-vl")
    model = model_cls(config)
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.save_pretrained(out)
    tok.save_pretrained(out)
    unit = patch * 2
    image = Qwen2VLImageProcessorPil(patch_size=patch, temporal_patch_size=2, merge_size=2,
                                     size={"shortest_edge": unit * unit * 4, "longest_edge": unit * unit * 16})
    image.save_pretrained(out)
    (out / "owrl_tiny.json").write_text(json.dumps({"family": family, "seed": seed}))
    return out


#: A tiny family's config, its model class and its vision patch size in pixels.
_Family = tuple["PreTrainedConfig", "type[PreTrainedModel]", int]


def _qwen3_vl(text: dict[str, Any], common: dict[str, Any]) -> _Family:
    """Tiny Qwen3-VL: ``text`` (the language model's settings, completed here) and ``common``
    (the special token ids) as its config, with its model class and patch size."""
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    text.update(head_dim=16, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                              "mrope_section": [4, 2, 2], "mrope_interleaved": True})
    vision = dict(depth=2, hidden_size=64, intermediate_size=128, num_heads=4, patch_size=16,
                  spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=64,
                  num_position_embeddings=64, deepstack_visual_indexes=[0])
    config = Qwen3VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=True, **common)
    return config, Qwen3VLForConditionalGeneration, 16


def _qwen2_vl(family: str, text: dict[str, Any], common: dict[str, Any]) -> _Family:
    """Tiny Qwen2-VL, or Qwen2.5-VL for ``qwen2.5-vl``: as :func:`_qwen3_vl`."""
    text.update(rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]})
    if family == "qwen2-vl":
        from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

        vision = dict(depth=2, embed_dim=64, hidden_size=64, num_heads=4, mlp_ratio=2, patch_size=14,
                      spatial_merge_size=2, temporal_patch_size=2)
        return (Qwen2VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=True, **common),
                Qwen2VLForConditionalGeneration, 14)
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    vision_25 = dict(depth=2, hidden_size=64, intermediate_size=128, num_heads=4, patch_size=14,
                     spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=64,
                     window_size=56, fullatt_block_indexes=[1])
    return (Qwen2_5_VLConfig(text_config=text, vision_config=vision_25, tie_word_embeddings=True, **common),
            Qwen2_5_VLForConditionalGeneration, 14)
