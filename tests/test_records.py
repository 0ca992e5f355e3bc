import json

import pytest

from infer_compare.base.errors import SchemaError
from infer_compare.base.records import Report, load_report


def test_report_round_trip(lenet_report, tmp_path):
    p = tmp_path / "r.json"
    lenet_report.save(p)
    back = load_report(p)
    assert back == lenet_report  # frozen dataclasses compare field by field, nested too
    assert back.to_dict() == json.loads(p.read_text())


def test_schema_versions(lenet_report, tmp_path):
    d = lenet_report.to_dict()
    d["schema_version"] = 99
    p = tmp_path / "new.json"
    p.write_text(json.dumps(d))
    with pytest.raises(SchemaError, match="schema_version 99"):
        load_report(p)
    p.write_text('{"rows": []}')
    with pytest.raises(SchemaError, match="not an infer-compare results file"):
        load_report(p)
    p.write_text("not json")
    with pytest.raises(SchemaError, match="not a JSON results file"):
        load_report(p)


def test_unknown_fields_are_ignored(lenet_report):
    d = lenet_report.to_dict()
    d["future_field"] = 1
    d["rows"][0]["another_new_field"] = "x"
    assert Report.from_dict(d).rows[0] == lenet_report.rows[0]
