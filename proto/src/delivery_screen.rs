//! A delivery screen between its domain type (`checkfu_core`, shared by the
//! scheduler that names it and the sessions service that holds messages for
//! it) and the mesh message both send.

use crate::sessions::v1::DeliveryScreen;
use checkfu_core::Result;
use checkfu_core::delivery_screen as domain;

impl DeliveryScreen {
    pub fn of(s: &domain::DeliveryScreen) -> DeliveryScreen {
        DeliveryScreen {
            model_routing_profile_id: s.model_routing_profile_id.clone(),
            tier: s.tier.clone().unwrap_or_default(),
            instructions: s.instructions.clone(),
            on_failure: s.on_failure.as_str().into(),
        }
    }

    /// The screen as sent, checked as the API checks it.
    pub fn to_domain(&self, field: &str) -> Result<domain::DeliveryScreen> {
        let on_failure = match self.on_failure.as_str() {
            "" => domain::OnFailure::FailClosed,
            s => domain::OnFailure::parse(&format!("{field}.on_failure"), s)?,
        };
        let s = domain::DeliveryScreen { on_failure, ..self.unchecked() };
        s.check(field)?;
        Ok(s)
    }

    /// The screen as the API shows it (`input.delivery_screen`).
    pub fn view(&self) -> serde_json::Value {
        serde_json::to_value(self.unchecked()).unwrap_or_default()
    }

    /// The fields as sent, an unknown `on_failure` read as `fail_closed`.
    fn unchecked(&self) -> domain::DeliveryScreen {
        domain::DeliveryScreen {
            model_routing_profile_id: self.model_routing_profile_id.clone(),
            tier: Some(self.tier.clone()).filter(|t| !t.is_empty()),
            instructions: self.instructions.clone(),
            on_failure: domain::OnFailure::parse("on_failure", &self.on_failure).unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_screen_survives_the_wire_and_is_checked_on_arrival() {
        let s = domain::DeliveryScreen {
            model_routing_profile_id: "mrp_01jx0000000000000000000001".into(),
            tier: Some("low".into()),
            instructions: "block: X1".into(),
            on_failure: domain::OnFailure::FailOpen,
        };
        assert_eq!(DeliveryScreen::of(&s).to_domain("delivery_screen").expect("valid"), s);
        let bare =
            DeliveryScreen { model_routing_profile_id: s.model_routing_profile_id.clone(), instructions: "x".into(), ..Default::default() };
        let read = bare.to_domain("delivery_screen").expect("defaults");
        assert_eq!((read.tier, read.on_failure), (None, domain::OnFailure::FailClosed));
        assert!(DeliveryScreen { on_failure: "maybe".into(), ..bare }.to_domain("delivery_screen").is_err());
    }
}
