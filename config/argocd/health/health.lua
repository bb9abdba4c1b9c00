-- Argo CD health check of igw's InferenceGatewayConfig and ModelRoute
-- (gateway.igw.dev/v1alpha1). The operator writes only status: an
-- observedGeneration and conditions, of which Ready sums up the object.
local hs = {}
if obj.status == nil or obj.status.observedGeneration == nil or obj.metadata.generation == nil
    or obj.status.observedGeneration < obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the igw operator to observe generation " .. tostring(obj.metadata.generation)
  return hs
end
if obj.status.conditions ~= nil then
  for _, c in ipairs(obj.status.conditions) do
    if c.type == "Ready" and c.status == "False" then
      hs.status = "Degraded"
      hs.message = (c.reason or "NotReady") .. ": " .. (c.message or "")
      return hs
    end
  end
end
hs.status = "Healthy"
hs.message = "Ready"
if obj.status.conditions ~= nil then
  for _, c in ipairs(obj.status.conditions) do
    if c.type == "Ready" and c.message ~= nil and c.message ~= "" then
      hs.message = c.message
    end
  end
end
return hs
