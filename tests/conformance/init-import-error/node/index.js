require('no_such_dependency_xyz');

exports.handler = async () => 'unreachable';
