"""`vllm.inputs.TokensPrompt`: a TypedDict in vLLM, a dict at run time."""

TokensPrompt = dict
