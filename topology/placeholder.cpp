// placeholder until the topology module lands
