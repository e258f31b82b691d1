"""Platform bridges: each turns platform events into core.IncomingMessage and delivers core.Reply."""
