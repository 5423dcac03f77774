"""Engine settings chosen for the machine, without starting an engine."""

from workers.vllm_generator import cpu_native_dtype


def test_auto_dtype_on_a_cpu_is_bfloat16_only_where_the_cpu_computes_it_natively():
    assert cpu_native_dtype("flags : fpu sse2 avx avx2 fma") == "float32"  # AVX2 only: bfloat16 would be emulated
    assert cpu_native_dtype("flags : avx2 avx512f avx512_bf16") == "bfloat16"
    assert cpu_native_dtype("flags : avx512f amx_bf16 amx_tile") == "bfloat16"
    assert cpu_native_dtype("Features : fp asimd bf16 i8mm") == "bfloat16"  # Arm


def test_a_local_model_folder_is_told_apart_by_its_json_files_and_its_files_sizes(tmp_path):
    from workers.model_source import model_revision

    (tmp_path / "config.json").write_text('{"hidden_size": 64}')
    (tmp_path / "model.safetensors").write_bytes(b"0" * 100)
    first = model_revision(str(tmp_path))
    assert first.startswith("folder:")
    (tmp_path / ".complete").write_text("converted at noon")  # hidden files are not the model
    assert model_revision(str(tmp_path)) == first
    (tmp_path / "model.safetensors").write_bytes(b"0" * 101)
    second = model_revision(str(tmp_path))
    (tmp_path / "config.json").write_text('{"hidden_size": 65}')
    assert len({first, second, model_revision(str(tmp_path))}) == 3


def test_a_hub_model_is_told_apart_by_the_commit_of_its_cached_snapshot(tmp_path, monkeypatch):
    from huggingface_hub import constants

    from workers.model_source import model_revision

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    assert model_revision("org/model") == "hub:unknown"  # not in the cache: nothing to tell
    repo = tmp_path / "models--org--model"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0123abcd" * 5)
    (repo / "snapshots" / ("0123abcd" * 5)).mkdir(parents=True)
    (repo / "snapshots" / ("0123abcd" * 5) / "config.json").write_text("{}")
    assert model_revision("org/model") == "hub:" + "0123abcd" * 5
