"""Native file formats shared by readers and the synthetic writers."""
