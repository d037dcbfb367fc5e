"""The evaluator's copy of an experiment's ``{out}``: regular, singly linked files only, within a size budget."""

import os

from pytest_fmlbench.isolation import artifacts


def test_only_regular_files_reach_the_evaluator_s_copy(tmp_path):
    out, dest = tmp_path / "out", tmp_path / "evidence"
    (out / "nested" / "deeper").mkdir(parents=True)
    (out / "predictions.npy").write_bytes(b"\x00\x01" * 5000)
    (out / "nested" / "deeper" / "run_info.json").write_text("{}")
    (out / "empty.txt").write_bytes(b"")
    secret = tmp_path / "private_labels.npy"
    secret.write_bytes(b"labels")
    (out / "stolen.npy").symlink_to(secret)
    (out / "linked_folder").symlink_to(tmp_path, target_is_directory=True)
    os.link(secret, out / "alias.npy")
    os.mkfifo(out / "pipe")
    refused = artifacts.collect(out, dest)
    assert sorted(refused) == ["alias.npy: a hard link to another file", "linked_folder: a symbolic link",
                               "pipe: not a regular file", "stolen.npy: a symbolic link"]
    copied = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*"))
    assert copied == ["empty.txt", "nested", "nested/deeper", "nested/deeper/run_info.json", "predictions.npy"]
    assert (dest / "predictions.npy").read_bytes() == b"\x00\x01" * 5000
    assert not any(p.is_symlink() for p in dest.rglob("*"))


def test_a_copy_past_the_budget_is_refused_and_nothing_of_it_is_left(tmp_path):
    out, dest = tmp_path / "out", tmp_path / "evidence"
    out.mkdir()
    (out / "a.bin").write_bytes(b"a" * 600)
    (out / "b.bin").write_bytes(b"b" * 600)
    refused = artifacts.collect(out, dest, max_bytes=1000)
    (kept,) = [p.name for p in dest.iterdir()]  # whichever the walk met first
    (left_out,) = {"a.bin", "b.bin"} - {kept}
    assert refused == [f"{left_out}: over the artefact size budget (600 bytes, 400 left)"]
    assert (dest / kept).read_bytes() == (out / kept).read_bytes()


def test_the_evaluator_s_copy_holds_only_this_step_s_files(tmp_path):
    """The folder is emptied, not replaced: what the last step's experiment (or evaluator) left is gone."""
    out, dest = tmp_path / "out", tmp_path / "evidence"
    out.mkdir()
    (out / "first.txt").write_text("1")
    assert artifacts.collect(out, dest) == []
    (dest / "left_by_the_evaluator").mkdir()
    (dest / "left_by_the_evaluator" / "x").write_text("x")
    inode = dest.stat().st_ino
    (out / "first.txt").unlink()
    (out / "second.txt").write_text("2")
    assert artifacts.collect(out, dest) == []
    assert sorted(p.name for p in dest.iterdir()) == ["second.txt"] and dest.stat().st_ino == inode
    # a link where the folder was is removed, never followed
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep")
    (tmp_path / "evidence2").symlink_to(elsewhere, target_is_directory=True)
    assert artifacts.collect(out, tmp_path / "evidence2") == []
    assert (elsewhere / "keep.txt").exists() and not (tmp_path / "evidence2").is_symlink()
