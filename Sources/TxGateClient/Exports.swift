// The wire types the client's API uses (Advices, StepUpChallenge, JSONValue) come with it.
@_exported import TxGateWire
