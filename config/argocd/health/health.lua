-- Argo CD health check of igw's InferenceGatewayConfig, ModelRoute and
-- GlobalInferenceGateway (gateway.igw.dev/v1alpha1). The operator writes only
-- status: an observedGeneration and conditions, of which Ready sums up the
-- object; a GlobalInferenceGateway also counts its members in rotation.
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
-- A hub with members out of rotation still routes, on fewer clusters than
-- it was given: Degraded, naming each member out and why.
local st = obj.status
if st.memberCount ~= nil and st.membersInRotation ~= nil and st.membersInRotation < st.memberCount then
  local out = {}
  for _, m in ipairs(st.members or {}) do
    for _, c in ipairs(m.conditions or {}) do
      if c.type == "InRotation" and c.status ~= "True" then
        table.insert(out, m.name .. " (" .. (c.message or c.reason or c.status) .. ")")
      end
    end
  end
  hs.status = "Degraded"
  hs.message = tostring(st.membersInRotation) .. " of " .. tostring(st.memberCount) .. " members in rotation"
  if #out > 0 then
    hs.message = hs.message .. "; out of rotation: " .. table.concat(out, ", ")
  end
  return hs
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
