"""`mcp-rl export`: a tuned LoRA in the formats the programs MCP users already run.

    peft    the adapter as PEFT saves it (PeftModel.from_pretrained, vLLM --lora-modules)
    merged  a standalone transformers model with the adapter folded in
    gguf    one .gguf file for llama.cpp and Ollama, with an Ollama Modelfile

Every export also holds `mcp-rl-export.json` (what it was made from; `mcp_rl.tuned.find_tuned`
reads it) and a model card README.md (base model, server and tools, training prompt, results
before/after, commands to serve it).
"""

from mcp_rl.export.card import ExportInfo
from mcp_rl.export.exporter import FORMATS, ExportResult, export_tuned
from mcp_rl.export.gguf_export import GGUF_TYPES, SUPPORTED_ARCHS

__all__ = ["FORMATS", "GGUF_TYPES", "SUPPORTED_ARCHS", "ExportInfo", "ExportResult", "export_tuned"]
