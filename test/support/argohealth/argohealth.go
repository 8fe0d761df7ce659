// Package argohealth runs an Argo CD resource health check (a
// resource.customizations.health Lua script) the way Argo CD runs it: in gopher-lua, the
// engine Argo CD embeds, with the live object as the global obj, reading the status and
// message of the table the script returns.
package argohealth

import (
	"fmt"

	lua "github.com/yuin/gopher-lua"
)

// Health is what a health script returns.
type Health struct {
	Status  string
	Message string
}

// Run runs script on obj (an object as unstructured JSON: maps, slices, strings,
// numbers, booleans).
func Run(script string, obj map[string]any) (Health, error) {
	L := lua.NewState()
	defer L.Close()
	L.SetGlobal("obj", value(L, obj))
	if err := L.DoString(script); err != nil {
		return Health{}, err
	}
	ret, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		return Health{}, fmt.Errorf("the health script returned %s, not a table", L.Get(-1).Type())
	}
	out := Health{Status: lua.LVAsString(ret.RawGetString("status")), Message: lua.LVAsString(ret.RawGetString("message"))}
	switch out.Status {
	case "Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown":
		return out, nil
	}
	return out, fmt.Errorf("the health script returned status %q, which Argo CD does not know", out.Status)
}

// value converts unstructured JSON to Lua values, as Argo CD does: objects and arrays
// become tables (arrays indexed from 1), numbers Lua numbers.
func value(L *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case nil:
		return lua.LNil
	case map[string]any:
		t := L.NewTable()
		for k, e := range x {
			t.RawSetString(k, value(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range x {
			t.Append(value(L, e))
		}
		return t
	case string:
		return lua.LString(x)
	case bool:
		return lua.LBool(x)
	case int64:
		return lua.LNumber(x)
	case int:
		return lua.LNumber(x)
	case int32:
		return lua.LNumber(x)
	case float64:
		return lua.LNumber(x)
	}
	panic(fmt.Sprintf("argohealth: a value of type %T in an unstructured object", v))
}
