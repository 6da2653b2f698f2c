"""Task/Limits validation and Result round-trips: pure Python, no sandbox needed."""
import pytest

from sandbox import Limits, Result, Task


def test_task_needs_exactly_one_of_cmd_or_script():
    with pytest.raises(ValueError, match="exactly one of cmd"):
        Task()
    with pytest.raises(ValueError, match="exactly one of cmd"):
        Task(cmd=["true"], script="true")


def test_task_cmd_as_string_is_rejected_with_hint():
    with pytest.raises(ValueError, match="use script="):
        Task(cmd="python3 main.py")


@pytest.mark.parametrize("bad", ["/etc/passwd", "../x", "a/../../x", ""])
def test_file_paths_must_stay_in_work_dir(bad):
    with pytest.raises(ValueError, match="path"):
        Task(cmd=["true"], files={bad: "x"})


def test_collect_paths_must_stay_in_work_dir():
    with pytest.raises(ValueError, match="inside the work dir"):
        Task(cmd=["true"], collect=["../../etc/shadow"])


@pytest.mark.parametrize("field,value", [("wall_s", 0), ("memory_mb", -1), ("nproc", 1), ("network", "no")])
def test_bad_limits_name_the_field(field, value):
    with pytest.raises(ValueError, match=field.split("_")[0]):
        Limits(**{field: value})


def test_task_roundtrips_through_dict_with_bytes():
    t = Task(cmd=["python3", "x.py"], files={"x.py": "print(1)", "b.bin": b"\x00\xff"}, stdin=b"\x01",
             env={"A": "1"}, limits=Limits(wall_s=3, network=True), collect=["o.txt"], id="t1")
    t2 = Task.from_dict(t.to_dict())
    assert t2 == t and t2.hash() == t.hash()


def test_task_hash_ignores_id_but_not_content():
    a = Task(cmd=["true"], id="a")
    assert a.hash() == Task(cmd=["true"], id="b").hash()
    assert a.hash() != Task(cmd=["false"]).hash()


def test_unknown_task_field_is_named():
    with pytest.raises(ValueError, match="timeout"):
        Task.from_dict({"cmd": ["true"], "timeout": 3})


def test_result_roundtrip_and_ok():
    r = Result(exit_code=0, stdout="x", files={"created": ["a"], "modified": [], "deleted": []}, tier="bwrap")
    assert Result.from_dict(r.to_dict()) == r and r.ok
    assert not Result(exit_code=0, infra_error="boom").ok
