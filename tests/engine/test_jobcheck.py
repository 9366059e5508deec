"""Job files sent to fio servers: what is refused, how the error reads, what can be allowed."""
import pytest

from iolab.engine.jobfile import check as jobcheck
from iolab.core.errors import IolabError

CLEAN = """; written by iolab
[global]
ioengine=libaio
direct=1
filename=/mnt/scratch/iolab.dat
[SEQ1M-Q8T1]
rw=read
bs=1M
iodepth=8
"""


def test_a_clean_job_file_passes():
    assert jobcheck.problems(CLEAN) == []
    jobcheck.check_text(CLEAN, "jobs/seq.fio")


@pytest.mark.parametrize("line, option, category", [
    ("exec_prerun=/usr/bin/touch /tmp/pwned", "exec_prerun", "exec"),
    ("exec_postrun = rm -rf /", "exec_postrun", "exec"),
    ("EXEC_PRERUN=/bin/true", "EXEC_PRERUN", "exec"),
    ("ioengine=exec", "ioengine=exec", "exec"),
    ("ioengine = Exec", "ioengine=Exec", "exec"),
    ("ioengine=external:/tmp/evil.so", "ioengine=external:/tmp/evil.so", "exec"),
    ("ioengine=/tmp/evil.so", "ioengine=/tmp/evil.so", "exec"),
    ("trigger=/sbin/reboot", "trigger", "trigger"),
    ("trigger-remote=echo b > /proc/sysrq-trigger", "trigger-remote", "trigger"),
    ("trigger_file=/tmp/t", "trigger_file", "trigger"),
    ("include /etc/fio/more.fio", "include", "include"),
    ("filename=${HOME}/x", "filename", "expansion"),
    ("size=$mb_memory", "size", "expansion"),
    ("numjobs=$(ncpus*2)", "numjobs", "expansion"),
])
def test_each_refusal_names_file_section_and_option(line, option, category):
    text = CLEAN + line + "\n"
    found = [p for p in jobcheck.problems(text, "jobs/seq.fio")]
    assert [p.category for p in found] == [category]
    with pytest.raises(IolabError) as err:
        jobcheck.check_text(text, "jobs/seq.fio")
    message = str(err.value)
    assert message.startswith("jobs/seq.fio:10: [SEQ1M-Q8T1] ")  # file, line, section
    assert f"{option}: refused" in message
    assert f"allow_job_options: [{category}]" in message
    jobcheck.check_text(text, "jobs/seq.fio", allow=[category])  # allowed on purpose
    jobcheck.check_text(text, "jobs/seq.fio", allow="all")


def test_the_global_section_is_named_and_every_problem_is_listed():
    text = "[global]\nexec_prerun=/bin/true\n[a]\nrw=read\ninclude x.fio\n[b]\nioengine=exec\n"
    with pytest.raises(IolabError) as err:
        jobcheck.check_text(text, "x.fio")
    message = str(err.value)
    assert message.startswith("x.fio:2: [global] exec_prerun: refused")
    assert "line 5 [a] include (include)" in message and "line 7 [b] ioengine=exec (exec)" in message
    # allowing one category leaves the others refused
    with pytest.raises(IolabError, match=r"x.fio:5: \[a\] include"):
        jobcheck.check_text(text, "x.fio", allow=["exec"])


def test_comments_and_a_dollar_in_a_comment_are_fine():
    text = CLEAN + "; exec_prerun=/bin/true costs $5\n# include nothing\n"
    jobcheck.check_text(text, "c.fio")


def test_dollar_in_a_section_name_is_refused():
    with pytest.raises(IolabError, match=r"\[\$\{HOME\}\] section name"):
        jobcheck.check_text("[${HOME}]\nrw=read\n", "d.fio")


def test_unknown_allowance_is_an_error():
    with pytest.raises(IolabError, match="unknown allowance 'shell'"):
        jobcheck.check_text(CLEAN, "x.fio", allow=["shell"])


def test_check_file_names_the_file(tmp_path):
    path = tmp_path / "bad.fio"
    path.write_text("[j]\nexec_postrun=/bin/sh -c 'id'\n")
    with pytest.raises(IolabError) as err:
        jobcheck.check_file(path)
    assert str(err.value).startswith(f"{path}:2: [j] exec_postrun: refused")
    with pytest.raises(IolabError, match="cannot read"):
        jobcheck.check_file(tmp_path / "missing.fio")
