-- Argo CD health of a fleet.giteatools.dev RetirementPlan, the same verdicts kstatus
-- (Flux's wait) gives: Progressing until the controller has observed the plan's
-- generation and while it is Reconciling (waiting for its host plans, being applied, an
-- approver looked at again), Degraded once Stalled (a final refusal or failure), Healthy
-- once Ready (a dry run, or a finished apply).
local hs = {}
local function describe(c)
  local text = c.reason or ""
  if c.message ~= nil and c.message ~= "" then
    text = text .. ": " .. c.message
  end
  return text
end
if obj.status == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to observe the plan"
  return hs
end
local generation = obj.metadata.generation
if generation ~= nil and obj.status.observedGeneration ~= generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the controller to observe generation " .. tostring(generation)
  return hs
end
local ready = nil
if obj.status.conditions ~= nil then
  for _, c in ipairs(obj.status.conditions) do
    if c.type == "Stalled" and c.status == "True" then
      hs.status = "Degraded"
      hs.message = describe(c)
      return hs
    end
    if c.type == "Reconciling" and c.status == "True" then
      hs.status = "Progressing"
      hs.message = describe(c)
      return hs
    end
    if c.type == "Ready" then
      ready = c
    end
  end
end
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(ready)
  return hs
end
hs.status = "Progressing"
if ready ~= nil then
  hs.message = describe(ready)
else
  hs.message = "Waiting for the controller"
end
return hs
