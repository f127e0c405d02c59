"""torch_expandable: torch_copy with PyTorch's expandable segments
(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), whose device tensors are
made of several VMM mappings (cuMemCreate + cuMemMap)."""
import os

os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"

import torch_copy  # noqa: E402  (the allocator reads the setting when torch loads)

if __name__ == "__main__":
    torch_copy.main("torch_expandable")
