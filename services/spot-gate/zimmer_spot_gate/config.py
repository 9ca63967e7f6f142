"""Spot-gate's own configuration, beside the shared settings, and the price book built from it.

`ZIMMER_SPOT_PRICES` overrides or extends the list-price table (dollars per million tokens),
as JSON: {"claude-opus-4-5": {"input": 5, "output": 25, "cache_write": 6.25, "cache_read": 0.5}}.
Spend already in the ledger keeps the dollars it was recorded at.
"""

from __future__ import annotations

import json
import logging

from pydantic_settings import BaseSettings, SettingsConfigDict

from zimmer_common.logs import kv
from zimmer_common.settings import ConfigurationError
from zimmer_spot_gate.domain.prices import DEFAULT_PRICES, ModelPrices, PriceMatch, Prices, resolve_price

log = logging.getLogger("zimmer.spot_gate.prices")
# Distinct unknown models warned about per process; past it they are still priced, not logged.
WARNED_MAX = 1_000


class SpotSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ZIMMER_SPOT_", extra="ignore")

    prices: str = ""

    def price_table(self) -> dict[str, ModelPrices]:
        table = dict(DEFAULT_PRICES)
        if not self.prices.strip():
            return table
        try:
            overrides = json.loads(self.prices)
            for model, p in overrides.items():
                table[model.strip().lower()] = ModelPrices(float(p["input"]), float(p["output"]),
                                                           float(p["cache_write"]), float(p["cache_read"]))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ConfigurationError(f"ZIMMER_SPOT_PRICES is not a valid price table ({exc!r}); expected "
                                     '{"model": {"input": $, "output": $, "cache_write": $, "cache_read": $}}') from None
        return table


class PriceBook:
    """The configured price table. Pricing never refuses work: a model with no price of its own is
    priced by version prefix or family, else at the dearest known price, with one WARNING per
    model so an operator learns to add it (DESIGN §9)."""

    def __init__(self, table: Prices | None = None):
        self.table: dict[str, ModelPrices] = dict(table if table is not None else DEFAULT_PRICES)
        self._warned: set[str] = set()

    def resolve(self, model: str) -> PriceMatch:
        match = resolve_price(model, self.table)
        if match.how == "unknown" and model not in self._warned and len(self._warned) < WARNED_MAX:
            self._warned.add(model)
            log.warning("a model with no price of its own is priced at the dearest known price; add it to "
                        "ZIMMER_SPOT_PRICES", extra=kv(model=model, priced_as=match.priced_as))
        return match
