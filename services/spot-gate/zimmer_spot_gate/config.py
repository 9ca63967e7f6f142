"""Spot-gate's own configuration, beside the shared settings.

`ZIMMER_SPOT_PRICES` overrides or extends the list-price table (dollars per million tokens),
as JSON: {"claude-opus-4-5": {"input": 5, "output": 25, "cache_write": 6.25, "cache_read": 0.5}}.
Spend already in the ledger keeps the dollars it was recorded at.
"""

from __future__ import annotations

import json

from pydantic_settings import BaseSettings, SettingsConfigDict

from zimmer_common.settings import ConfigurationError
from zimmer_spot_gate.domain.pricing import DEFAULT_PRICES, ModelPrices


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
                table[model.lower()] = ModelPrices(float(p["input"]), float(p["output"]), float(p["cache_write"]),
                                                   float(p["cache_read"]))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ConfigurationError(f"ZIMMER_SPOT_PRICES is not a valid price table ({exc!r}); expected "
                                     '{"model": {"input": $, "output": $, "cache_write": $, "cache_read": $}}') from None
        return table
