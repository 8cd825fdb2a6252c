"""``fme-ai-resilience serve`` start-up checks (the served gateway: tests/integration)."""
from __future__ import annotations

from fme_ai_resilience.cli import main


def test_missing_secret_variable_is_a_usage_error(tmp_path, monkeypatch, capsys):
    """Naming an unset environment variable for a secret fails with exit code 2."""
    monkeypatch.delenv("NO_SUCH_SECRET_VAR", raising=False)
    code = main(["serve", "--db", f"sqlite:///{tmp_path / 'l.db'}", "--port", "0",
                 "--secret-env", "NO_SUCH_SECRET_VAR"])
    assert code == 2 and "NO_SUCH_SECRET_VAR" in capsys.readouterr().err


def test_unreachable_ledger_fails_at_start(capsys):
    """A ledger that cannot be opened stops the server before it listens (exit 1)."""
    code = main(["serve", "--db", "sqlite:////nonexistent-dir/l.db", "--port", "0"])
    assert code == 1 and "error: ledger sqlite:////nonexistent-dir/l.db" in capsys.readouterr().err


def test_db_defaults_to_the_fair_db_url_variable(monkeypatch, capsys):
    """Without --db, serve uses $FAIR_DB_URL like every other ledger command, and without
    either it refuses (exit 2) instead of serving a ledger `status` would not find."""
    from fme_ai_resilience.cli import build_parser

    monkeypatch.setenv("FAIR_DB_URL", "postgresql://postgres@127.0.0.1:5432/ledger")
    assert build_parser().parse_args(["serve"]).db == "postgresql://postgres@127.0.0.1:5432/ledger"
    monkeypatch.delenv("FAIR_DB_URL")
    assert build_parser().parse_args(["serve"]).db is None
    assert main(["serve", "--port", "0"]) == 2
    assert "no ledger given" in capsys.readouterr().err
