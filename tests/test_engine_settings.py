"""Engine settings chosen for the machine, without starting an engine."""

from workers.vllm_generator import cpu_native_dtype


def test_auto_dtype_on_a_cpu_is_bfloat16_only_where_the_cpu_computes_it_natively():
    assert cpu_native_dtype("flags : fpu sse2 avx avx2 fma") == "float32"  # AVX2 only: bfloat16 would be emulated
    assert cpu_native_dtype("flags : avx2 avx512f avx512_bf16") == "bfloat16"
    assert cpu_native_dtype("flags : avx512f amx_bf16 amx_tile") == "bfloat16"
    assert cpu_native_dtype("Features : fp asimd bf16 i8mm") == "bfloat16"  # Arm
