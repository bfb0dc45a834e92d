"""GPU types (resource flavours), quotas per team and type, member caps and priority queues."""
