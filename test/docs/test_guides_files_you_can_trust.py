"""guides/files-you-can-trust.md: verify passed the fresh run, export and dataset, then failed the changed
checkpoint file and export, which OnnxPolicy refused naming what differs; the environments' state stayed
signed, and files are written with the umask's permissions."""
import os
import stat

PAGE = "guides/files-you-can-trust.md"


def test_verify_passed_the_fresh_files_and_failed_the_changed_ones(page):
    ns = page(PAGE)
    assert ns["status"] == 0 and ns["damaged_status"] == 1
    failed = {os.path.basename(f.path) for f in ns["findings"] if f.status == "FAILED"}
    assert failed == {os.path.basename(ns["actor"]), "policy.onnx"}
    assert any("SHA-256 differs" in f.what for f in ns["findings"] if f.status == "FAILED")


def test_the_environments_state_is_signed_with_the_users_key(page):
    (envs,) = [f for f in page(PAGE)["findings"] if os.path.basename(f.path).startswith("envs_")]
    assert envs.status == "ok" and "signed with your key" in envs.what


def test_the_changed_export_was_refused_naming_what_differs(page):
    refusal = page(PAGE)["refusal"]
    assert "damaged or changed since it was exported" in refusal and "differs" in refusal


def test_files_are_written_with_the_umasks_permissions(page):
    directory = page(PAGE)["__directory__"]
    umask = os.umask(0)
    os.umask(umask)
    for path in (directory / "runs" / "count" / "config.yaml", directory / "data" / "count" / "dataset.json"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask, path
