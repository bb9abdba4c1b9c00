package controllers

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ApplyChildren applies objs as a reconcile of owner would, with owner as that
// reconcile read it: the suite hands it a copy read before a deletion.
func (c *Common) ApplyChildren(ctx context.Context, owner client.Object, objs []client.Object) error {
	_, err := c.applyChildren(ctx, owner, objs, nil, &refProblems{})
	return err
}

// ConfigChildKinds are the kinds of a config's children, in its namespace and beside a Gateway.
var ConfigChildKinds = configChildren.all()
