"""Stress tests of a trained task model's explanations: FTC (faithfulness through counterfactuals) and
AddText (does inserted text move the prediction)."""
