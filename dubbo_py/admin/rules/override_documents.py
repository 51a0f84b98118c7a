"""Provider weight and disabling as items of a service's configurators document (Dubbo 3's
dynamic-configuration format), the way the console writes them.

The console changes a provider's weight or takes it out of service by editing the
``<interface>:<version>:<group>.configurators`` document rather than by adding ``override://``
URLs (what ``dubbo-py override`` writes): a document write is versioned and recorded in the
rule history with who and when, so it shows in ``rules history`` and can be rolled back. Each
item this module writes names one provider address and one parameter::

    configs:
      - addresses: ["10.0.0.5:50051"]
        side: provider
        parameters: {weight: 50}

Other items of the document are kept (comments and layout are not: the document is rewritten).
"""

from __future__ import annotations

from typing import Any

import yaml

from dubbo_py.admin.rules.documents import load_document
from dubbo_py.errors import RuleError

__all__ = ["set_disabled", "set_weight", "target_key"]


def target_key(service: str, version: str = "", group: str = "") -> str:
    """The configurators key of a service's providers of this version and group."""
    return f"{service}:{version}:{group}.configurators"


def _document(text: str | None, service: str, source: str) -> dict[str, Any]:
    if text is None or not text.strip():
        return {"configVersion": "v3.0", "scope": "service", "key": service, "configs": []}
    data = load_document(text, source).data
    if not isinstance(data, dict):
        raise RuleError("the configurators document is not a YAML mapping", source=source)
    configs = data.setdefault("configs", [])
    if not isinstance(configs, list):
        raise RuleError("'configs' is not a list", source=source)
    return data


def _is_item(item: object, address: str, parameter: str) -> bool:
    """An item naming exactly this one address and setting only this parameter."""
    if not isinstance(item, dict):
        return False
    addresses = item.get("addresses")
    parameters = item.get("parameters")
    return (
        addresses == [address]
        and item.get("side", "provider") == "provider"
        and isinstance(parameters, dict)
        and set(parameters) == {parameter}
    )


def _with_item(
    text: str | None, service: str, address: str, parameter: str, value: object | None, source: str
) -> str:
    data = _document(text, service, source)
    configs = [c for c in data["configs"] if not _is_item(c, address, parameter)]
    if value is not None:
        configs.append(
            {"addresses": [address], "side": "provider", "parameters": {parameter: value}}
        )
    data["configs"] = configs
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)


def set_weight(text: str | None, service: str, address: str, weight: int, source: str = "") -> str:
    """The document with the weight of the provider at ``address`` set (replacing an earlier
    weight item of that address)."""
    if weight < 0:
        raise ValueError("weight must be >= 0")
    return _with_item(text, service, address, "weight", weight, source)


def set_disabled(
    text: str | None, service: str, address: str, disabled: bool, source: str = ""
) -> str:
    """The document with the provider at ``address`` taken out of service (``disabled``) or the
    item that did so removed."""
    return _with_item(text, service, address, "disabled", True if disabled else None, source)
