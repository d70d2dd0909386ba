set -x
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi -L
mkdir -p $OUT/heldout
timeout 500 torchrun --nproc_per_node 2 scratch_device/heldout.py ranks --out $OUT/heldout 2>&1 | grep -v "^\s*$" | tail -40
ls -la $OUT/heldout
