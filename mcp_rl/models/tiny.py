"""A tiny randomly initialised causal LM, built here with no download, for fast tests.

It has the shape of the real default policy (a Qwen2-architecture model, a byte-level BPE
tokenizer, ChatML special tokens, a chat template that renders tools and tool calls the way
Qwen's does), so the agent loop, the masks and GRPO can be tested end to end in seconds.
Its output is noise: it never makes sensible tool calls. Everything is a pure function of `seed`.
"""

from __future__ import annotations

import functools

import torch

PAD = "<|endoftext|>"
BOS = "<|im_start|>"
EOS = "<|im_end|>"
SPECIAL_TOKENS = [PAD, BOS, EOS, "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]

# Training text for the tokenizer: chat-shaped English and JSON, so common words and JSON
# punctuation become single tokens (written for this project).
_CORPUS = """
system user assistant tool The user asks a question and the assistant answers it.
You are a helpful assistant. You can call tools to look things up before you answer.
To call a tool, answer with a JSON object that names the tool and gives its arguments.
{"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}
{"name": "list_items", "arguments": {"category": "tools", "limit": 10}}
{"name": "get_item", "arguments": {"sku": "A-100"}}
{"name": "search", "arguments": {"query": "weather in Paris", "max_results": 3}}
{"type": "function", "function": {"name": "add", "description": "Add two numbers.",
"parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
"required": ["a", "b"]}}}
The current time in Tokyo is 14:05. The answer is 42. There are 7 items in stock.
Error: unknown tool. Error: missing required argument. The tool returned an empty result.
What time is it in London? How many items are left in the warehouse? Which order shipped last?
Thank you. I will check the inventory first, then answer with the total count.
0 1 2 3 4 5 6 7 8 9 10 11 12 100 2024-01-01T00:00:00Z true false null [] {} "" : , .
"""

# A ChatML template in the shape of Qwen2.5's: tools listed in the system turn, assistant tool
# calls as <tool_call> JSON, consecutive tool results grouped into one user turn.
CHAT_TEMPLATE = (
    # Every literal is emitted through {{- '...' }} so the template engine's block trimming
    # cannot eat newlines.
    "{%- if messages and messages[0]['role'] == 'system' -%}"
    "{%- set system = messages[0]['content'] -%}{%- set rest = messages[1:] -%}"
    "{%- else -%}{%- set system = 'You are a helpful assistant.' -%}{%- set rest = messages -%}{%- endif -%}"
    "{{- '<|im_start|>system\\n' + system -}}"
    "{%- if tools -%}"
    "{{- '\\n\\n# Tools\\n\\nTo call a tool, reply with a JSON object' -}}"
    '{{- \' {"name": <tool name>, "arguments": <arguments object>}\' -}}'
    "{{- ' inside <tool_call></tool_call> tags.\\nAvailable tools:\\n<tools>' -}}"
    "{%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}"
    "{{- '\\n</tools>' -}}"
    "{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- for m in rest -%}"
    "{%- if m['role'] == 'tool' -%}"
    "{%- if loop.first or rest[loop.index0 - 1]['role'] != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}"
    "{{- '\\n<tool_response>\\n' + m['content'] + '\\n</tool_response>' -}}"
    "{%- if loop.last or rest[loop.index0 + 1]['role'] != 'tool' -%}{{- '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- elif m['role'] == 'assistant' -%}"
    "{{- '<|im_start|>assistant' -}}"
    # the newline the generation prompt ends with, even for an empty reply (as Qwen2.5's template)
    "{%- if m['content'] or not m.get('tool_calls') -%}{{- '\\n' + (m['content'] or '') -}}{%- endif -%}"
    "{%- for call in m.get('tool_calls') or [] -%}"
    "{%- set f = call['function'] if call['function'] is defined else call -%}"
    "{{- '\\n<tool_call>\\n{\"name\": ' + (f['name'] | tojson) + ', \"arguments\": ' -}}"
    "{%- if f['arguments'] is string -%}{{- f['arguments'] -}}{%- else -%}{{- f['arguments'] | tojson -}}{%- endif -%}"
    "{{- '}\\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


@functools.lru_cache(maxsize=1)
def _tokenizer_json(vocab_size: int) -> str:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    lines = [line for line in _CORPUS.splitlines() if line.strip()]
    tok.train_from_iterator(lines * 4, trainer=trainer)
    return tok.to_str()


def tiny_tokenizer(vocab_size: int = 512):
    """A byte-level BPE tokenizer (any text encodes) with ChatML specials and a tools template."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(_tokenizer_json(vocab_size)),
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        padding_side="left",
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def tiny_model(seed: int = 0, vocab_size: int = 512, dtype: torch.dtype = torch.float32):
    """A 2-layer Qwen2 causal LM (about 100k parameters) with random weights drawn from `seed`."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = tiny_tokenizer(vocab_size)
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        rope_theta=10000.0,
        tie_word_embeddings=True,
        # A wider init than the usual 0.02 gives peaked next-token distributions, so greedy
        # decoding has clear winners (no near-ties that float rounding could flip).
        initializer_range=0.5,
        bos_token_id=tok.convert_tokens_to_ids(BOS),
        eos_token_id=tok.convert_tokens_to_ids(EOS),
        pad_token_id=tok.convert_tokens_to_ids(PAD),
    )
    gen = torch.random.fork_rng(devices=[])
    with gen:
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.to(dtype)
    model.eval()
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    return model, tok
