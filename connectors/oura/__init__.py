"""Oura: the API v2 sync (`rhythm sync oura`), authorised by `rhythm auth oura`."""

from connectors.registry import ApiSync

SOURCES = (
    ApiSync(
        name="oura",
        label="Oura",
        opener="connectors.oura.sync:open_sync",
        authorised="connectors.oura.sync:authorised",
        default_stream="sleep",
        record_source="oura",
        settings={
            "oura_api_base": "https://api.ouraring.com",
            "oura_auth_url": "https://cloud.ouraring.com/oauth/authorize",
            "oura_token_url": "https://api.ouraring.com/oauth/token",
            "oura_client_id": None,
            "oura_client_secret": None,
            "oura_redirect_port": 8766,  # must match the redirect URI registered with the Oura app
            "oura_history_days": 730,  # the first sync reaches this far back
            "oura_lag_days": 2,  # re-fetched on every sync (Oura re-scores; today grows)
        },
    ),
)

__all__ = ["SOURCES"]
