//! The reviewed price catalog: integer micro-USD per million tokens. Cost is
//! rounded up so metering never under-bills a budget.

use crate::model::Usage;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Price {
    pub provider: &'static str,
    pub model: &'static str,
    pub input_micro_usd_per_mtok: i64,
    pub output_micro_usd_per_mtok: i64,
}

/// `model: "*"` prices every model of the provider not listed by name.
pub const CATALOG: &[Price] = &[
    Price { provider: "scripted", model: "*", input_micro_usd_per_mtok: 1_000_000, output_micro_usd_per_mtok: 5_000_000 },
    Price { provider: "anthropic", model: "claude-sonnet-4-5", input_micro_usd_per_mtok: 3_000_000, output_micro_usd_per_mtok: 15_000_000 },
    Price { provider: "anthropic", model: "claude-haiku-4-5", input_micro_usd_per_mtok: 1_000_000, output_micro_usd_per_mtok: 5_000_000 },
    Price { provider: "anthropic", model: "claude-opus-4-1", input_micro_usd_per_mtok: 15_000_000, output_micro_usd_per_mtok: 75_000_000 },
    Price { provider: "openai", model: "gpt-4.1", input_micro_usd_per_mtok: 2_000_000, output_micro_usd_per_mtok: 8_000_000 },
    Price { provider: "openai", model: "gpt-4.1-mini", input_micro_usd_per_mtok: 400_000, output_micro_usd_per_mtok: 1_600_000 },
];

pub fn price_of(provider: &str, model: &str) -> Option<&'static Price> {
    CATALOG
        .iter()
        .find(|p| p.provider == provider && p.model == model)
        .or_else(|| CATALOG.iter().find(|p| p.provider == provider && p.model == "*"))
}

/// Cost in micro-USD, rounded up; unknown models cost nothing but are logged
/// by the caller so the catalog can be reviewed.
pub fn cost_micro_usd(provider: &str, model: &str, usage: Usage) -> Option<i64> {
    let p = price_of(provider, model)?;
    let numer = i128::from(usage.input_tokens) * i128::from(p.input_micro_usd_per_mtok)
        + i128::from(usage.output_tokens) * i128::from(p.output_micro_usd_per_mtok);
    Some(((numer + 999_999) / 1_000_000) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripted_costs_one_and_five_micro_usd_per_token() {
        let c = cost_micro_usd("scripted", "any", Usage { input_tokens: 10, output_tokens: 3 });
        assert_eq!(c, Some(25));
    }

    #[test]
    fn fractional_cost_rounds_up() {
        let c = cost_micro_usd("openai", "gpt-4.1-mini", Usage { input_tokens: 1, output_tokens: 0 });
        assert_eq!(c, Some(1));
        assert_eq!(cost_micro_usd("nope", "x", Usage::default()), None);
    }
}
