"""The main job (make demo) on its bundled data: it runs and prints the accuracy/cost table."""

from __future__ import annotations

from lightgbm_cegb import demo


def test_demo_table(capsys):
    demo.main(["--rounds", "30", "--tradeoffs", "0.003", "0.03"])
    out = capsys.readouterr().out
    rows = {line.split()[0] + (line.split()[1] if line.startswith("CEGB") else ""): line.split()
            for line in out.splitlines() if line.startswith(("LightGBM", "CEGB"))}
    assert set(rows) == {"LightGBM", "CEGBtradeoff=0.003", "CEGBtradeoff=0.03"}
    costs = [float(rows[k][-2]) for k in ("LightGBM", "CEGBtradeoff=0.003", "CEGBtradeoff=0.03")]
    aucs = [float(rows[k][-4]) for k in ("LightGBM", "CEGBtradeoff=0.003", "CEGBtradeoff=0.03")]
    assert costs[0] > costs[1] > costs[2]  # a larger trade-off buys fewer features
    assert all(0.5 <= auc <= 1.0 for auc in aucs) and aucs[0] > 0.75


def test_demo_figure(tmp_path, capsys):
    path = tmp_path / "demo.png"
    demo.main(["--rounds", "5", "--tradeoffs", "0.01", "--plot", str(path)])
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert [p.name for p in tmp_path.iterdir()] == ["demo.png"]  # no temporary file left beside it
    assert f"figure written to {path}" in capsys.readouterr().out
