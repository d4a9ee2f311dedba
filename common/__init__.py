"""Shared record types and errors: where connectors, storage and mapping meet."""
